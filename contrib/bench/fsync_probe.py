#!/usr/bin/env python3
"""fsync_probe.py -- the disk's own fdatasync latency, without saker.

    contrib/bench/fsync_probe.py SECONDS FILE

Preallocates 8 MiB in FILE, then every millisecond overwrites 512 bytes
and fdatasyncs them (as LMDB's journal does per batch), and prints the
percentiles, the maximum and the syncs over 10 ms with their times.
"""
import os, time, sys
secs = float(sys.argv[1]); path = sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.pwrite(fd, b'\0' * (8 << 20), 0); os.fsync(fd)
lat = []; off = 0; end = time.monotonic() + secs; slow = []
while time.monotonic() < end:
    t0 = time.monotonic()
    os.pwrite(fd, b'x' * 512, off); os.fdatasync(fd)
    d = time.monotonic() - t0; lat.append(d)
    if d > 0.010: slow.append((time.strftime('%H:%M:%S', time.gmtime()), round(d*1000, 1)))
    off = (off + 512) % (8 << 20)
    time.sleep(0.001)
lat.sort(); n = len(lat)
print("n=%d p50=%.0fus p99=%.0fus p99.9=%.0fus max=%.1fms >10ms:%d >20ms:%d" % (n, lat[n//2]*1e6, lat[int(n*.99)]*1e6, lat[int(n*.999)]*1e6, lat[-1]*1e3, sum(1 for x in lat if x > .01), sum(1 for x in lat if x > .02)))
print(slow[:20])
