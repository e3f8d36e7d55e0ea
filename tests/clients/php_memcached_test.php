<?php
/* PHP Memcached (libmemcached) against sakerd, in text or binary mode: run
 * by tests/check_clients.  Usage: php php_memcached_test.php PORT text|binary */
$port = (int)$argv[1];
$binary = $argv[2] === 'binary';

function client($port, $binary) {
	$m = new Memcached();
	$m->setOption(Memcached::OPT_BINARY_PROTOCOL, $binary);
	$m->setOption(Memcached::OPT_COMPRESSION, false);
	/* timeouts above the longest t= used below (docs/clients.md) */
	$m->setOption(Memcached::OPT_RECV_TIMEOUT, 20000000);
	$m->setOption(Memcached::OPT_SEND_TIMEOUT, 20000000);
	$m->setOption(Memcached::OPT_POLL_TIMEOUT, 20000);
	$m->addServer('127.0.0.1', $port);
	return $m;
}

function check($what, $got, $want) {
	if ($got !== $want) {
		fwrite(STDERR, "FAIL $what: got " . var_export($got, true) . ", want " . var_export($want, true) . "\n");
		exit(1);
	}
	echo "ok $what\n";
}

$m = client($port, $binary);
check("set", $m->set("pq", "hello"), true);
check("get", $m->get("pq"), "hello");
check("get empty", $m->get("pq"), false);
check("miss code", $m->getResultCode(), Memcached::RES_NOTFOUND);
check("add", $m->add("pq", "added"), true);
check("replace refused", $m->replace("pq", "x"), false);
$m->setOption(Memcached::OPT_COMPRESSION, false);
check("append refused", $m->append("pq", "x"), false);
check("prepend refused", $m->prepend("pq", "x"), false);
/* gets: the value with a CAS token, and the connection in step after it */
$r = $m->get("pq", null, Memcached::GET_EXTENDED);
check("gets", is_array($r) ? $r["value"] : $r, "added");
check("cas refused", $m->cas(0, "pq", "x") || $m->cas(1, "pq", "x"), false);
$m->set("pq", "next");
check("in step", $m->get("pq"), "next");
$m->set("pa", "1"); $m->set("pc", "3");
check("getMulti", $m->getMulti(["pa", "pb", "pc"]), ["pa" => "1", "pc" => "3"]);
$keys = [];
for ($i = 0; $i < 200; $i++) $keys[] = "m$i";
$m->set("m7", "seven"); $m->set("m199", "last");
check("getMulti 200", $m->getMulti($keys), ["m7" => "seven", "m199" => "last"]);
$keys = [];
for ($i = 0; $i < 10000; $i++) $keys[] = "n$i";
$m->set("n9999", "far");
check("getMulti 10000", $m->getMulti($keys), ["n9999" => "far"]);
$t0 = microtime(true);
check("blocking get timeout", $m->get("pw/t=300"), false);
$el = microtime(true) - $t0;
check("waited", $el >= 0.25 && $el < 5, true);
$pid = pcntl_fork();
if ($pid == 0) {
	$m2 = client($port, $binary);
	usleep(200000);
	$m2->set("pw", "late");
	/* leave without destructors: the parent's connection is shared */
	pcntl_exec("/bin/true");
}
check("blocking get woken", $m->get("pw/t=5000"), "late");
pcntl_waitpid($pid, $st);
$m->set("pr", "item");
check("open", $m->get("pr/open"), "item");
check("close", $m->get("pr/close"), false);
check("gone", $m->get("pr"), false);
$m->set("pr", "again");
check("open 2", $m->get("pr/open"), "again");
check("abort", $m->get("pr/abort"), false);
check("back", $m->get("pr"), "again");
check("delete", $m->delete("pr"), true);
for ($i = 0; $i < 150; $i++) $m->set("s$i", "x");
$st = $m->getStats();
$st = reset($st);
check("stats", $st !== false && (int)$st["curr_connections"] >= 1, true);
// 150 and a few queues exist now (the sets made them; the getMulti of
// missing queues made none): the reply lists 100
$om = (int)$st["queues_omitted"];
check("stats bounded", $om >= 50 && $om < 150, true);
check("version", is_array($m->getVersion()), true);
$pid = pcntl_fork();
if ($pid == 0) {
	$m2 = client($port, $binary);
	usleep(200000);
	$m2->set("qb", "second");
	pcntl_exec("/bin/true");
}
$t0 = microtime(true);
check("blocking getMulti", $m->getMulti(["qa/t=5000", "qb/t=5000"]), ["qb/t=5000" => "second"]);
check("woken early", microtime(true) - $t0 < 4, true);
pcntl_waitpid($pid, $st);
check("quit", $m->quit(), true);
echo "done\n";
