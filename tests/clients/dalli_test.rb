# Ruby Dalli (binary protocol in Dalli 3) against sakerd: run by
# tests/check_clients.  Usage: ruby dalli_test.rb PORT
require 'dalli'

port = ARGV[0]
# socket_timeout above the longest t= used below (docs/clients.md)
dc = Dalli::Client.new("127.0.0.1:#{port}", serializer: nil, compress: false,
                       socket_timeout: 20)

def check(what, got, want)
  if got != want
    STDERR.puts "FAIL #{what}: got #{got.inspect}, want #{want.inspect}"
    exit 1
  end
  puts "ok #{what}"
end

def refused(dc)
  yield
  'accepted'
rescue Dalli::DalliError => e
  # Dalli names the status (0x83 Not supported), not the server's text
  e.message.include?('Not supported') ? 'refused' : e.message
end

check('set', dc.set('dq', 'hello', 0, raw: true).nil?, false)
check('get', dc.get('dq'), 'hello')
check('get empty', dc.get('dq'), nil)
check('add', dc.add('dq', 'added', 0, raw: true).nil?, false)
check('replace refused', refused(dc) { dc.replace('dq', 'x', 0, raw: true) }, 'refused')
check('append refused', refused(dc) { dc.append('dq', 'x') }, 'refused')
check('prepend refused', refused(dc) { dc.prepend('dq', 'x') }, 'refused')
check('in step', dc.get('dq'), 'added')
dc.set('da', '1', 0, raw: true)
dc.set('dc', '3', 0, raw: true)
check('get_multi', dc.get_multi('da', 'db', 'dc'), { 'da' => '1', 'dc' => '3' })
dc.set('m9999', 'far', 0, raw: true)
check('get_multi 10000', dc.get_multi((0...10_000).map { |i| "m#{i}" }), { 'm9999' => 'far' })
t0 = Time.now
check('blocking get timeout', dc.get('dw/t=300'), nil)
el = Time.now - t0
check('waited', el >= 0.25 && el < 5, true)
pid = fork do
  d2 = Dalli::Client.new("127.0.0.1:#{port}", serializer: nil, compress: false)
  sleep 0.2
  d2.set('dw', 'late', 0, raw: true)
  exit! 0
end
check('blocking get woken', dc.get('dw/t=5000'), 'late')
Process.wait(pid)
dc.set('dr', 'item', 0, raw: true)
check('open', dc.get('dr/open'), 'item')
check('close', dc.get('dr/close'), nil)
check('gone', dc.get('dr'), nil)
dc.set('dr', 'again', 0, raw: true)
check('open 2', dc.get('dr/open'), 'again')
check('abort', dc.get('dr/abort'), nil)
check('back', dc.get('dr'), 'again')
check('delete', dc.delete('dr'), true)
# retries (issue 37): an abort with a delay, and Touch (0x1c)
dc.set('rt', 'job', 0, raw: true)
check('open for retry', dc.get('rt/open'), 'job')
t0 = Time.now
check('abort with delay', dc.get('rt/abort/delay=400'), nil)
check('delayed meanwhile', dc.get('rt'), nil)
check('back after the delay', dc.get('rt/t=5000'), 'job')
check('not before it', Time.now - t0 >= 0.39, true)
# lease* queues have open_timeout = 1s (check_clients); a second worker
# must not get the item while the first keeps touching it (1.5 s)
d2 = Dalli::Client.new("127.0.0.1:#{port}", serializer: nil, compress: false)
dc.set('lease1', 'long job', 0, raw: true)
check('open long job', dc.get('lease1/open'), 'long job')
3.times do |i|
  sleep 0.5
  check("touch #{i}", dc.touch('lease1', 0), true)
  check("still held #{i}", d2.get('lease1'), nil)
end
check('close long job', dc.get('lease1/close'), nil)
check('touch not held', dc.touch('lease1', 0), nil)
check('in step after', dc.get('lease1'), nil)
d2.close
150.times { |i| dc.set("s#{i}", 'x', 0, raw: true) }
st = dc.stats.values.first
check('stats', st['curr_connections'].to_i >= 1, true)
# 150 and a few queues exist now (the sets made them; the get_multi of
# missing queues made none): the reply lists 100
check('stats bounded', (50...150).include?(st['queues_omitted'].to_i), true)
check('version', dc.version.values.first.nil?, false)
pid = fork do
  d2 = Dalli::Client.new("127.0.0.1:#{port}", serializer: nil, compress: false)
  sleep 0.2
  d2.set('mb', 'second', 0, raw: true)
  exit! 0
end
t0 = Time.now
check('blocking get_multi', dc.get_multi('ma/t=5000', 'mb/t=5000'), { 'mb/t=5000' => 'second' })
check('woken early', Time.now - t0 < 4, true)
Process.wait(pid)
dc.close
check('close connection', true, true)
puts 'done'
