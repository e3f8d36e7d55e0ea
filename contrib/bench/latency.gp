# latency.gp -- latency percentiles per server as clustered bars, log scale.
# gnuplot -e "datafile='latency.dat'; outfile='x.png'; plottitle='...'" latency.gp
# datafile: header "target p50 p90 p99 p99.9", then one row per server (µs).
set terminal pngcairo size 900,560 noenhanced font ",10"
set output outfile
set title plottitle
set ylabel 'latency (us, log scale)'
set logscale y
set grid ytics
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top
set xtics nomirror
set datafile missing 'NaN'
plot for [i=2:5] datafile using i:xtic(1) title columnheader(i)
