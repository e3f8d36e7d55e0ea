# throughput.gp -- throughput against connections, one line per server.
# gnuplot -e "datafile='pair_d1.dat'; outfile='x.png'; plottitle='...'; ylabel='items/s'" throughput.gp
# datafile: a header row (x label, then one server name per column), then
# one row per connection count.
if (!exists("ylabel")) ylabel = 'items/s'
set terminal pngcairo size 900,560 noenhanced font ",10"
set output outfile
set title plottitle
set xlabel 'connections'
set ylabel ylabel
set logscale x 2
set grid
set key outside right top
set format y '%.0s%c'
set datafile missing 'NaN'
stats datafile skip 1 nooutput
ncols = STATS_columns
plot for [i=2:ncols] datafile using 1:i with linespoints lw 2 pt 7 title columnheader(i)
