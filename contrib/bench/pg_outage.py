#!/usr/bin/env python3
"""pg_outage.py -- how sakerd on the postgres store answers while its
database hangs (a partition: a proxy that stops relaying) and while it is
stopped (issue 34).

Starts a throwaway PostgreSQL cluster (initdb; as root the server runs as
"nobody"), a TCP proxy in this process (127.0.0.1:PORT -> the cluster's
unix socket), and sakerd with --store postgres,timeout=T through the
proxy.  Then, for each outage (frozen proxy, stopped server), for
SECONDS: one connection sends `version` every 10 ms (on a fixed
schedule) and records how long each answer took, from the moment it was
sent ("rtt") and from the moment it was due ("sched": a stall delays
every request due meanwhile, not just the one in flight; coordinated
omission); another writes (`set`) every 100 ms and records the answers.
Reports p50/p99/max of `version`, the longest write, the time
from the end of the outage to the first STORED, and sakerd's RSS and
open descriptors before and after.  Python's timer and the shared
machine add noise: read the maxima as upper bounds.

usage: contrib/bench/pg_outage.py [-t SECONDS] [--timeout T] [--probe P]
                                  [--keep]
  SAKERD=path/to/sakerd (default ./sakerd); PG_BINDIR (default: newest
  /usr/lib/postgresql/N/bin).
"""
import argparse
import glob
import os
import pwd
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

RELAY, FREEZE, REFUSE = "relay", "freeze", "refuse"


class Proxy(threading.Thread):
    """127.0.0.1:port -> unix socket; mode relay / freeze / refuse."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.mode = RELAY
        self.lock = threading.Lock()
        self.ls = self._listen(0)
        self.port = self.ls.getsockname()[1]
        self.pairs = []
        self.stop = False

    @staticmethod
    def _listen(port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        return s

    def set_mode(self, m):
        with self.lock:
            self.mode = m

    def _close_pair(self, p):
        for s in p:
            try:
                s.close()
            except OSError:
                pass
        if p in self.pairs:
            self.pairs.remove(p)

    def run(self):
        while not self.stop:
            with self.lock:
                mode = self.mode
            if mode == REFUSE:
                for p in list(self.pairs):
                    self._close_pair(p)
                if self.ls is not None:
                    self.ls.close()
                    self.ls = None
                time.sleep(0.01)
                continue
            if self.ls is None:
                try:
                    self.ls = self._listen(self.port)
                except OSError:
                    time.sleep(0.05)
                    continue
            rd = [self.ls]
            if mode == RELAY:
                for a, b in self.pairs:
                    rd += [a, b]
            r, _, _ = select.select(rd, [], [], 0.01)
            for s in r:
                if s is self.ls:
                    c, _ = self.ls.accept()
                    u = socket.socket(socket.AF_UNIX)
                    try:
                        u.connect(self.path)
                    except OSError:
                        c.close()
                        u.close()
                        continue
                    self.pairs.append((c, u))
                    continue
                for p in list(self.pairs):
                    if s in p:
                        o = p[1] if s is p[0] else p[0]
                        try:
                            d = s.recv(65536)
                            if not d:
                                raise OSError
                            o.sendall(d)
                        except OSError:
                            self._close_pair(p)


def pg_bindir():
    if os.environ.get("PG_BINDIR"):
        return os.environ["PG_BINDIR"]
    c = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
               key=lambda p: int(p.split("/")[4]))
    if not c:
        sys.exit("pg_outage.py: no PostgreSQL binaries (set PG_BINDIR)")
    return os.path.dirname(c[-1])


def as_pg(argv, **kw):
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")

        def drop():
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        kw["preexec_fn"] = drop
    return subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, **kw)


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise OSError("closed")
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode(errors="replace")

    def cmd(self, req):
        t0 = time.monotonic()
        self.s.sendall(req)
        ln = self.line()
        return ln, (time.monotonic() - t0) * 1000.0


def proc_state(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                rss = int(ln.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100.0))] if v else float("nan")


def run_outage(name, port, pid, seconds, start, end):
    lat, sched, writes, done = [], [], [], threading.Event()

    def sampler():
        c = Client(port)
        t0 = time.monotonic()
        i = 0
        while not done.is_set():
            due = t0 + i * 0.01
            i += 1
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ln, ms = c.cmd(b"version\r\n")
            assert ln.startswith("VERSION"), ln
            lat.append(ms)
            sched.append((time.monotonic() - due) * 1000.0)

    def writer():
        c = Client(port)
        i = 0
        while not done.is_set():
            ln, ms = c.cmd(b"set outage 0 0 5\r\nx%04d\r\n" % (i % 10000))
            writes.append((ln, ms))
            i += 1
            time.sleep(0.1)

    rss0, fd0 = proc_state(pid)
    start()
    t = [threading.Thread(target=sampler), threading.Thread(target=writer)]
    for th in t:
        th.start()
    time.sleep(seconds)
    done.set()
    for th in t:
        th.join()
    rss1, fd1 = proc_state(pid)
    t_end = time.monotonic()
    end()
    c = Client(port)
    while True:
        ln, _ = c.cmd(b"set outage 0 0 5\r\nafter\r\n")
        if ln == "STORED":
            break
        time.sleep(0.02)
    back = (time.monotonic() - t_end) * 1000.0
    stored = sum(1 for w in writes if w[0] == "STORED")
    failed = [w for w in writes if w[0] != "STORED"]
    doubt = sum(1 for w in writes if "outcome unknown" in w[0])
    print("%-8s %5d version: rtt p50 %.2f p99 %.2f max %.1f ms; sched p50 "
          "%.2f p99 %.2f max %.1f ms, %d over 10 ms" % (
              name, len(lat), pct(lat, 50), pct(lat, 99), max(lat),
              pct(sched, 50), pct(sched, 99), max(sched),
              sum(1 for x in sched if x > 10.0)))
    print("         %d writes: %d STORED, %d SERVER_ERROR (%d in doubt), "
          "slowest %.0f ms | first STORED %.0f ms after the end | RSS "
          "%d->%d kB, fds %d->%d" % (len(writes), stored, len(failed), doubt,
                                     max(w[1] for w in writes), back, rss0,
                                     rss1, fd0, fd1))
    if failed:
        print("         first error: %s" % failed[0][0])
        print("         last error:  %s" % failed[-1][0])
    return lat


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-t", type=float, default=30.0, help="outage seconds")
    ap.add_argument("--timeout", default="2", help="driver timeout=")
    ap.add_argument("--probe", default=None, help="driver probe= (default:"
                    " the driver's)")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    a = ap.parse_args()
    sakerd = os.path.abspath(os.environ.get("SAKERD", "./sakerd"))
    bindir = pg_bindir()
    d = tempfile.mkdtemp(prefix="saker-pgoutage-")
    os.chmod(d, 0o755)
    if os.geteuid() == 0:
        nb = pwd.getpwnam("nobody")
        os.chown(d, nb.pw_uid, nb.pw_gid)
    data = os.path.join(d, "data")
    srv = None
    proxy = None

    def pg_start():
        as_pg([bindir + "/pg_ctl", "-D", data, "-w", "-l", d + "/server.log",
               "-o", "-c listen_addresses= -k %s -c fsync=off" % d, "start"])

    def pg_stop():
        as_pg([bindir + "/pg_ctl", "-D", data, "-w", "-m", "fast", "stop"])

    try:
        as_pg([bindir + "/initdb", "-D", data, "-A", "trust", "-U", "saker",
               "--no-sync"])
        pg_start()
        proxy = Proxy(os.path.join(d, ".s.PGSQL.5432"))
        proxy.start()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        opts = "timeout=%s" % a.timeout
        if a.probe is not None:
            opts += ",probe=%s" % a.probe
        spec = ("postgres,%s:host=127.0.0.1 port=%d dbname=postgres "
                "user=saker" % (opts, proxy.port))
        log = open(os.path.join(d, "sakerd.log"), "w")
        srv = subprocess.Popen([sakerd, "-p", str(port), "--store", spec, "-v"],
                               stdout=log, stderr=subprocess.STDOUT)
        for _ in range(100):
            try:
                Client(port)
                break
            except OSError:
                time.sleep(0.05)
        print("sakerd %s, store postgres,%s through a proxy; %g s per"
              " outage" % (sakerd, opts, a.t))
        run_outage("healthy", port, srv.pid, 3, lambda: None, lambda: None)
        run_outage("frozen", port, srv.pid, a.t,
                   lambda: proxy.set_mode(FREEZE),
                   lambda: proxy.set_mode(RELAY))
        run_outage("stopped", port, srv.pid, a.t, pg_stop, pg_start)
        run_outage("healthy", port, srv.pid, 3, lambda: None, lambda: None)
    finally:
        if srv is not None:
            srv.terminate()
            srv.wait()
        if proxy is not None:
            proxy.stop = True
        try:
            as_pg([bindir + "/pg_ctl", "-D", data, "-m", "immediate", "stop"])
        except subprocess.CalledProcessError:
            pass
        if a.keep:
            print("files kept in", d)
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
