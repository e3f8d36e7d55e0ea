#!/usr/bin/env python3
"""version_probe.py HOST:PORT SECONDS -- how long another client's `version`
waits while the server is under load: one connection sends `version` every
10 ms (on a fixed schedule, one at a time) and reports the round trips'
p50, p99 and max in milliseconds on one line.  (async_commit.sh runs it
beside `saker bench produce`.)"""
import socket
import sys
import time


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    secs = float(sys.argv[2])
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    rtts = []
    end = time.monotonic() + secs
    nxt = time.monotonic()
    while time.monotonic() < end:
        t0 = time.monotonic()
        s.sendall(b"version\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            d = s.recv(256)
            if not d:
                sys.exit("version_probe: connection closed")
            buf += d
        rtts.append((time.monotonic() - t0) * 1000.0)
        nxt += 0.010
        pause = nxt - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    rtts.sort()
    n = len(rtts)
    print("version n %d p50 %.2f p99 %.2f max %.1f ms" % (
        n, rtts[n // 2], rtts[min(n - 1, int(n * 0.99))], rtts[-1]))


if __name__ == "__main__":
    main()
