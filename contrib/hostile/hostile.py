#!/usr/bin/env python3
"""hostile.py -- hostile clients against a real sakerd, each bounded in time.

    contrib/hostile/hostile.py [--sakerd ./sakerd] [--secs 60] [SCENARIO...]

Scenarios (all by default):
  memcache  100 clients pipeline `stats` without reading the replies
  http      100 clients pipeline keep-alive GET /metrics (1,000 queues) and
            GET /healthz without reading the replies
  tls       stalled handshakes: 19 half ClientHellos with -c 20 --tls-ca (slots
            held over time, whether a certified client gets in), and the
            memory per handshake in progress (500 of them)
  login     50 parallel connections guess admin's password over text auth,
            SASL PLAIN and HTTP Basic together; also from 4 addresses at
            one user, and the time a right password behind wrong ones takes
  slowloris 1,000 HTTP clients send a header byte every 5 s with
            -c 100 --idle-timeout 20s: HTTP slots held, memcache clients
            refused, over time
  lockout   12 connections guess admin from 127.0.0.1 while admin logs in
            from 127.0.5.1 (text and HTTP Basic): admin's answer times
  console   --queues queues (100,000), 8 clients looping GET /api/queues
            ?limit=50 (and sort=-items): memcache `version` latency p50/p99
            meanwhile, and the console requests answered; --store to pick
            the store (memory, sqlite:PATH, lmdb:PATH)

Each scenario starts its own sakerd on free 127.0.0.1 ports in a temporary
directory and stops it; nothing runs longer than --secs (the login and tls
ones at most 20 s).  Figures: peak RSS of sakerd (from /proc), guesses
checked per second (a refusal after a check; a 429 is not a check),
connections ("slots") still open.  docs/security.md has the figures of one
run; the machine is shared, so timings are noisy.
"""
import argparse
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, sakerd, args, tmp, store="memory"):
        self.port = free_port()
        self.hport = free_port()
        self.log = open(os.path.join(tmp, "sakerd.log"), "ab")
        self.p = subprocess.Popen([sakerd, "-l", "127.0.0.1", "-p", str(self.port),
                                   "--store", store] + [a.replace("@HPORT@", str(self.hport))
                                                        for a in args],
                                  stdout=self.log, stderr=self.log, cwd=tmp)
        end = time.time() + 10
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("sakerd did not start")

    def rss_mb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    def stop(self):
        self.p.terminate()
        self.p.wait(10)
        self.log.close()


def fill_queues(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    for lo in range(0, n, 10000):
        s.sendall(b"".join(b"set queue-with-a-longish-name-%06d 0 0 5 noreply\r\nhello\r\n" % i
                           for i in range(lo, min(n, lo + 10000))) + b"version\r\n")
        buf = b""
        s.settimeout(600)
        while b"VERSION" not in buf:
            buf += s.recv(100)
    s.close()


def flood(srv, port, request, nclients, secs):
    """nclients sockets sending `request` without reading; peak RSS, open
    sockets at the end, seconds until all were closed (None: never)."""
    socks = []
    for _ in range(nclients):
        c = socket.create_connection(("127.0.0.1", port))
        c.setblocking(False)
        socks.append(c)
    t0 = time.time()
    peak = srv.rss_mb()
    all_closed = None
    sent = 0
    while time.time() - t0 < secs:
        _, w, _ = select.select([], socks, [], 0.1)
        for c in w:
            try:
                sent += c.send(request)
            except BlockingIOError:
                pass
            except OSError:
                socks.remove(c)
                c.close()
        if not socks and all_closed is None:
            all_closed = time.time() - t0
        peak = max(peak, srv.rss_mb())
    still = len(socks)
    for c in socks:
        c.close()
    time.sleep(1)
    return peak, still, all_closed, sent, srv.rss_mb()


def scenario_memcache(a, tmp):
    srv = Server(a.sakerd, [], tmp)
    fill_queues(srv.port, 1000)
    r0 = srv.rss_mb()
    peak, still, closed, sent, after = flood(srv, srv.port, b"stats\r\n" * 1000, 100, a.secs)
    srv.stop()
    print("memcache: 100 clients pipelining `stats` (1,000 queues) unread for %d s: "
          "RSS %.0f MB -> peak %.0f MB, %.0f MB after; %d MB sent; %d still open"
          % (a.secs, r0, peak, after, sent >> 20, still))


def scenario_http(a, tmp):
    for path in ("/metrics", "/healthz"):
        srv = Server(a.sakerd, ["--http", "127.0.0.1:@HPORT@"], tmp)
        fill_queues(srv.port, 1000)
        r0 = srv.rss_mb()
        req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, srv.hport)).encode() * 200
        peak, still, closed, sent, after = flood(srv, srv.hport, req, 100, a.secs)
        srv.stop()
        print("http: 100 clients pipelining keep-alive GET %s (1,000 queues) unread for %d s: "
              "RSS %.0f MB -> peak %.0f MB, %.0f MB after; %d MB sent; all closed after %s; "
              "%d still open"
              % (path, a.secs, r0, peak, after, sent >> 20,
                 "%.1f s" % closed if closed is not None else "never", still))


def make_certs(tmp):
    def sh(cmd):
        subprocess.run(cmd, shell=True, cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
       "-keyout ca.key -out ca.pem -days 2 -subj /CN=hostile-ca")
    for name, cn in (("server", "localhost"), ("client", "hostile-client")):
        sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key "
           "-out %s.csr -subj /CN=%s && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' "
           "> %s.ext && openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
           "-days 2 -out %s.pem -extfile %s.ext" % ((name, name, cn) + (name,) * 4))


HALF_HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])


def open_count(socks):
    n = 0
    for c in socks:
        if c.fileno() < 0:
            continue
        r, _, _ = select.select([c], [], [], 0)
        if r:
            try:
                if c.recv(4096) == b"":
                    c.close()
                    continue
            except OSError:
                c.close()
                continue
        n += 1
    return n


def scenario_tls(a, tmp):
    make_certs(tmp)
    tls = ["--tls-cert", "server.pem", "--tls-key", "server.key"]
    srv = Server(a.sakerd, tls + ["--tls-ca", "ca.pem", "-c", "20"], tmp)
    socks = []
    for _ in range(19):
        c = socket.create_connection(("127.0.0.1", srv.port))
        c.sendall(HALF_HELLO)
        socks.append(c)
    time.sleep(0.3)
    ctx = ssl.create_default_context(cafile=os.path.join(tmp, "ca.pem"))
    ctx.load_cert_chain(os.path.join(tmp, "client.pem"), os.path.join(tmp, "client.key"))
    t = time.time()
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", srv.port), 5),
                             server_hostname="localhost") as s:
            s.sendall(b"version\r\n")
            ok = s.recv(100).startswith(b"VERSION")
    except OSError as e:
        ok = False
    got_in = "in %.0f ms" % ((time.time() - t) * 1000) if ok else "refused"
    held = []
    t0 = time.time()
    for at in (1, 3, 6, 10):
        while time.time() - t0 < at:
            time.sleep(0.05)
        held.append("%d at %d s" % (open_count(socks), at))
    for c in socks:
        c.close()
    srv.stop()
    print("tls: 19 half ClientHellos with -c 20 --tls-ca: a certified client got %s; "
          "slots held by them: %s" % (got_in, ", ".join(held)))
    srv = Server(a.sakerd, tls, tmp)
    time.sleep(0.3)
    r0 = srv.rss_mb()
    socks = []
    for _ in range(500):
        c = socket.create_connection(("127.0.0.1", srv.port))
        c.sendall(HALF_HELLO)
        socks.append(c)
    time.sleep(1)
    r1 = srv.rss_mb()
    cctx = ssl.create_default_context()
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    socks2 = []
    for _ in range(500):
        c = socket.create_connection(("127.0.0.1", srv.port))
        c.setblocking(False)
        t = cctx.wrap_socket(c, do_handshake_on_connect=False)
        try:
            t.do_handshake()
        except ssl.SSLWantReadError:
            pass
        socks2.append(t)
    time.sleep(1)
    r2 = srv.rss_mb()
    for c in socks + socks2:
        c.close()
    srv.stop()
    print("tls: memory per handshake in progress: %.1f KiB after half a ClientHello, "
          "%.1f KiB after a whole one (500 each, RSS %.0f -> %.0f -> %.0f MB)"
          % ((r1 - r0) * 1024 / 500, (r2 - r1) * 1024 / 500, r0, r1, r2))


SASL = (bytes([0x80, 0x21, 0, 5, 0, 0, 0, 0, 0, 0, 0, 17]) + bytes(12) + b"PLAIN"
        + b"\0admin\0guess")


class Guesser:
    def __init__(self, kind, srv, src="127.0.0.1"):
        self.kind, self.srv, self.src, self.sock, self.buf = kind, srv, src, None, b""
        self.send()

    def connect(self, port):
        s = socket.socket()
        s.bind((self.src, 0))
        s.connect(("127.0.0.1", port))
        return s

    def send(self):
        self.buf = b""
        if self.kind == "http":
            if self.sock:
                self.sock.close()
            self.sock = self.connect(self.srv.hport)
            self.sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                              b"Authorization: Basic YWRtaW46Z3Vlc3M=\r\n\r\n")
            return
        if self.sock is None:
            self.sock = self.connect(self.srv.port)
        self.sock.sendall(b"set auth 0 0 11\r\nadmin guess\r\n" if self.kind == "text" else SASL)

    def read(self):
        """1: a checked failure, 0: an answer that was not a check,
        None: not complete yet."""
        try:
            b = self.sock.recv(4096)
        except OSError:
            b = b""
        if not b:
            self.sock.close()
            self.sock = None
            if self.kind == "http" and self.buf:
                return 1 if b" 401 " in self.buf else 0
            return 0
        self.buf += b
        if self.kind == "text" and b"\n" in self.buf:
            return 1 if b"authentication failure" in self.buf else 0
        if self.kind == "sasl" and len(self.buf) >= 24 and len(self.buf) >= 24 + self.buf[11]:
            return 1 if self.buf[7] == 0x20 else 0
        return None


def guess_for(gs, secs, close=True):
    checked = 0
    end = time.time() + secs
    while time.time() < end:
        live = [g for g in gs if g.sock is not None]
        r, _, _ = select.select([g.sock for g in live], [], [], 0.05)
        for g in live:
            if g.sock not in r:
                continue
            v = g.read()
            if v is None:
                continue
            checked += v
            if v == 0 and g.kind == "http":
                time.sleep(0.001)
            g.send()
    for g in gs if close else []:
        if g.sock:
            g.sock.close()
    return checked


def scenario_login(a, tmp):
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write("admin:root1:admin\nalice:secret:\n")
    os.chmod(users, 0o600)
    secs = min(a.secs, 20)
    srv = Server(a.sakerd, ["--auth-file", users, "--http", "127.0.0.1:@HPORT@"], tmp)
    gs = [Guesser(("text", "sasl", "http")[i % 3], srv) for i in range(50)]
    n = guess_for(gs, secs)
    print("login: 50 parallel connections from one address, text+SASL+HTTP Basic, %d s: "
          "%d guesses checked, %.2f/s" % (secs, n, n / secs))
    srv.stop()
    srv = Server(a.sakerd, ["--auth-file", users, "--http", "127.0.0.1:@HPORT@"], tmp)
    gs = [Guesser(("text", "sasl")[i % 2], srv, "127.0.0.%d" % (10 + i % 4)) for i in range(48)]
    n = guess_for(gs, secs)
    print("login: 48 parallel connections from 4 addresses at one user, %d s: "
          "%d guesses checked, %.2f/s" % (secs, n, n / secs))
    srv.stop()
    srv = Server(a.sakerd, ["--auth-file", users], tmp)
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"set auth 0 0 9\r\nalice bad\r\n")
        s.recv(100)
        s.close()
    socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(4)]
    t0 = time.time()
    for s in socks[:3]:
        s.sendall(b"set auth 0 0 11\r\nalice wrong\r\n")
    socks[3].sendall(b"set auth 0 0 12\r\nalice secret\r\n")
    socks[3].settimeout(20)
    ans = socks[3].recv(100)
    print("login: the right password behind 3 parallel wrong ones, 3 failures owed: "
          "%r after %.0f ms" % (ans.strip(), (time.time() - t0) * 1000))
    for s in socks:
        s.close()
    srv.stop()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def scenario_slowloris(a, tmp):
    srv = Server(a.sakerd, ["--http", "127.0.0.1:@HPORT@", "-c", "100",
                            "--idle-timeout", "20s"], tmp)
    drips, t0, refused, served, held = [], time.time(), 0, 0, []
    secs = min(a.secs, 60)
    while time.time() - t0 < secs:
        # the attacker reconnects whatever was closed
        while len(drips) < 1000:
            try:
                c = socket.create_connection(("127.0.0.1", srv.hport), 1)
                c.sendall(b"GET /healthz HTTP/1.1\r\nX-Drip: ")
                c.setblocking(False)
                drips.append(c)
            except OSError:
                break
        time.sleep(0.2)     # refused ones are closed by now
        for c in list(drips):
            try:
                if c.recv(1) == b"":
                    raise OSError
            except BlockingIOError:
                try:
                    c.send(b"a")
                except OSError:
                    drips.remove(c)
                    c.close()
            except OSError:
                drips.remove(c)
                c.close()
        try:
            m = socket.create_connection(("127.0.0.1", srv.port), 1)
            m.settimeout(2)
            m.sendall(b"version\r\n")
            if m.recv(100).startswith(b"VERSION"):
                served += 1
            else:
                refused += 1
            m.close()
        except OSError:
            refused += 1
        held.append((round(time.time() - t0), len(drips)))
        time.sleep(5)
    print("slowloris: 1,000 HTTP clients (reconnecting) dripping a header byte every"
          " 5 s, -c 100 --idle-timeout 20s: HTTP connections open over time (s, n) %s; memcache clients served %d,"
          " refused %d; RSS %.1f MB" % (held, served, refused, srv.rss_mb()))
    for c in drips:
        c.close()
    srv.stop()


def scenario_lockout(a, tmp):
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write("admin:root1:admin\n")
    os.chmod(users, 0o600)
    srv = Server(a.sakerd, ["--http", "127.0.0.1:@HPORT@", "--auth-file", users], tmp)
    gs = [Guesser(("text", "text", "http")[i % 3], srv) for i in range(12)]
    t0 = time.time()
    text_ms, http_codes = [], []
    import base64
    auth = base64.b64encode(b"admin:root1").decode()
    while time.time() - t0 < min(a.secs, 15):
        guess_for(gs, 0.5, close=False)
        s = socket.socket()
        s.bind(("127.0.5.1", 0))
        s.connect(("127.0.0.1", srv.port))
        t1 = time.time()
        s.sendall(b"set auth 0 0 11\r\nadmin root1\r\n")
        s.settimeout(20)
        try:
            ok = s.recv(100).startswith(b"STORED")
        except OSError:
            ok = False
        text_ms.append((time.time() - t1) * 1000 if ok else float("inf"))
        s.close()
        h = socket.socket()
        h.bind(("127.0.5.1", 0))
        h.connect(("127.0.0.1", srv.hport))
        h.sendall(("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Basic %s"
                   "\r\n\r\n" % auth).encode())
        h.settimeout(20)
        try:
            http_codes.append(int(h.recv(100).split()[1]))
        except (OSError, IndexError, ValueError):
            http_codes.append(0)
        h.close()
    for g in gs:
        if g.sock is not None:
            g.sock.close()
    print("lockout: 12 connections guessing admin from 127.0.0.1; admin from 127.0.5.1:"
          " text login p50 %.0f ms max %.0f ms (%d tries), HTTP Basic statuses %s" %
          (pct(text_ms, 0.5), max(text_ms), len(text_ms), http_codes))
    srv.stop()


def console_run(a, srv, path):
    # the loopers are processes: threads would share the GIL with the
    # version probe and time Python, not sakerd
    import multiprocessing
    stop = time.time() + min(a.secs, 20)
    done = multiprocessing.Queue()

    def looper(i):
        q = path + ("&sort=-items" if i % 2 and path.startswith("/api") else "")
        answered, slow = 0, []
        while time.time() < stop:
            try:
                t1 = time.time()
                c = socket.create_connection(("127.0.0.1", srv.hport), 30)
                c.sendall(("GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % q).encode())
                buf = b""
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    buf += d
                c.close()
                if b" 200 " in buf[:20]:
                    answered += 1
                    slow.append(time.time() - t1)
                else:
                    time.sleep(0.05)
            except OSError:
                time.sleep(0.05)
        done.put((answered, slow))
    ts = [multiprocessing.Process(target=looper, args=(i,)) for i in range(8)]
    for th in ts:
        th.start()
    lat = []
    m = socket.create_connection(("127.0.0.1", srv.port))
    while time.time() < stop:
        t1 = time.time()
        m.sendall(b"version\r\n")
        m.recv(100)
        lat.append((time.time() - t1) * 1000)
        time.sleep(0.01)
    answered, slow = [0], []
    for _ in ts:
        n, sl = done.get()     # all of them before any join (the pipe)
        answered[0] += n
        slow += sl
    for th in ts:
        th.join()
    m.close()
    print("console: 8 clients looping GET %s%s: %d answered (%.3f s median each);"
          " memcache version p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d samples); RSS %.1f MB" %
          (path, " (half sort=-items)" if path.startswith("/api") else "", answered[0],
           pct(slow, 0.5), pct(lat, 0.5), pct(lat, 0.99), max(lat), len(lat), srv.rss_mb()))


def scenario_console(a, tmp):
    srv = Server(a.sakerd, ["--http", "127.0.0.1:@HPORT@", "--max-queues", "1000000"],
                 tmp, a.store)
    t = time.time()
    fill_queues(srv.port, a.queues)
    print("console: %d queues made in %.1f s (%s store)" % (a.queues, time.time() - t,
                                                             a.store))
    # /healthz as the control: what the machine's load alone costs
    console_run(a, srv, "/healthz")
    console_run(a, srv, "/api/queues?limit=50")
    srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sakerd", default="./sakerd")
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--queues", type=int, default=100000)
    ap.add_argument("--store", default="memory")
    ap.add_argument("scenarios", nargs="*",
                    default=["memcache", "http", "tls", "login"])
    a = ap.parse_args()
    a.sakerd = os.path.abspath(a.sakerd)
    for name in a.scenarios:
        tmp = tempfile.mkdtemp(prefix="saker-hostile-")
        try:
            globals()["scenario_" + name](a, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
