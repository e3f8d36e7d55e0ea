#!/usr/bin/env python3
"""soak_explain.py -- match the soak's slow samples with sakerd's debug log.

    contrib/bench/soak_explain.py SOAKDIR SAKERD.LOG [--min-ms 10]

SOAKDIR is contrib/bench/soak.sh's --out directory; SAKERD.LOG the log of a
sakerd run with -vv (--log FILE) during the soak.  For every slow sample
(each <kind>_slow entry of the bench JSON files, at least --min-ms), the
log lines of the pause it sat through -- from the sample's receipt time
minus its latency to its receipt time, 5 ms of slack either side -- are
classified:

  fsync       an LMDB journal record (write + fdatasync) of 10 ms or more
  checkpoint  an LMDB or SQLite checkpoint
  promote / sweep / commit   those debug lines
  short-commits  only commits of 1-10 ms (each logged commit holds the
              loop; several in a row add up)
  cpu-wait    a "slow turn" line that spent more time waiting for a CPU
              than on one (the machine, not sakerd)
  cpu         a "slow turn" line that spent more on the CPU
  none        nothing logged: the pause was not sakerd's loop (the client
              or the machine)

and a count per cause is printed, with the largest samples listed.  The
log's time stamps have millisecond resolution, as have the samples'.
"""
import json
import os
import re
import sys
from datetime import datetime, timezone

LINE = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \S+ debug: (.*)$')


def parse_log(path):
    events = []
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            t = datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S.%f')
            ms = t.replace(tzinfo=timezone.utc).timestamp() * 1000
            msg = m.group(2)
            us = re.search(r': (\d+) us', msg)
            us = int(us.group(1)) if us else 0
            if msg.startswith('lmdb journal record'):
                kind = 'fsync' if us >= 10000 else None
            elif 'checkpoint' in msg:
                kind = 'checkpoint'
            elif msg.startswith('promote'):
                kind = 'promote'
            elif msg.startswith('sweep'):
                kind = 'sweep' if us >= 1000 else None
            elif msg.startswith('commit of batch'):
                kind = 'commit' if us >= 10000 else 'short-commits'
            elif msg.startswith('slow turn'):
                n = [int(x) for x in re.findall(r'(\d+) us', msg)[:2]]
                kind = 'cpu-wait' if len(n) == 2 and n[1] > n[0] else 'cpu'
            else:
                kind = None
            if kind:
                events.append((ms, kind, us, msg))
    return events


def main():
    args = sys.argv[1:]
    min_ms = 10.0
    if '--min-ms' in args:
        i = args.index('--min-ms')
        min_ms = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    soak, log = args
    events = parse_log(log)
    counts, rows = {}, []
    for name, kind in (('pair', 'lat'), ('blocking', 'e2e'), ('delayed', 'late')):
        path = os.path.join(soak, name + '.json')
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            continue
        with open(path) as f:
            r = json.load(f)
        for at, us in r.get(kind + '_slow', []):
            if us < min_ms * 1000:
                continue
            lo, hi = at - us / 1000 - 5, at + 5
            hit = sorted({e[1] for e in events if lo <= e[0] <= hi
                          and e[1] not in ('commit', 'short-commits')}) or \
                sorted({e[1] for e in events if lo <= e[0] <= hi}) or ['none']
            cause = '+'.join(hit)
            counts[cause] = counts.get(cause, 0) + 1
            top = [e for e in events if lo <= e[0] <= hi]
            rows.append((us, name, at, cause,
                         max(top, key=lambda e: e[2])[3] if top else ''))
    print('slow samples (>= %g ms) by what the log shows during them:' % min_ms)
    for cause, n in sorted(counts.items(), key=lambda x: -x[1]):
        print('  %-28s %d' % (cause, n))
    print('largest:')
    for us, name, at, cause, msg in sorted(rows, reverse=True)[:15]:
        t = datetime.fromtimestamp(at / 1000, timezone.utc).strftime('%H:%M:%S.%f')[:-3]
        print('  %8.1f ms %-9s %s  %-18s %s' % (us / 1000, name, t, cause, msg[:90]))


if __name__ == '__main__':
    main()
