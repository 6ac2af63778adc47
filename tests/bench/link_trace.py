#!/usr/bin/env python3
"""Link utilisation over time on the emulated cluster (netns_cluster.sh --link-trace).

  link_trace.py sample OUT          in a host's namespace: every 2 ms, append
                                    "time tx_bytes rx_bytes" of its eth0 to OUT, until
                                    SIGTERM (or --seconds S)
  link_trace.py summary RATE_BITS NAME=FILE...
                                    per host and direction: the mean use of the link
                                    while the job moved bytes, and how much of that time
                                    it was busy (a 20 ms window above 80% of the rate)
  link_trace.py timeline RATE_BITS FROM TO NAME=FILE...
                                    each 20 ms window between FROM and TO seconds (from
                                    the first sample) as a fraction of the rate

Counters are the kernel's (/sys/class/net/eth0/statistics), seen from the host's own
namespace, so they count everything on the wire: payload, headers, acknowledgements.
Why: a step's mean rate says how many bytes moved, not when. Whether the link idles
at the end of a step (the pull waiting for the last push), or one direction runs at
half speed while the other is done, only shows over time.
"""
import bisect
import signal
import sys
import time

WINDOW = 0.02  # seconds per bucket
BUSY = 0.8     # a window above this fraction of the rate counts as busy


def sample(out_path, seconds=None):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    base = "/sys/class/net/eth0/statistics/"
    with open(base + "tx_bytes") as tx, open(base + "rx_bytes") as rx, open(out_path, "w") as out:
        t0 = time.time()
        while not stop and (seconds is None or time.time() - t0 < seconds):
            tx.seek(0)
            rx.seek(0)
            out.write("%.4f %s %s\n" % (time.time(), tx.read().strip(), rx.read().strip()))
            time.sleep(0.002)


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                rows.append((float(parts[0]), int(parts[1]), int(parts[2])))
    if len(rows) < 2:
        sys.exit("link_trace: %s has fewer than two samples" % path)
    return rows


def windows(rows, col, rate_bytes, start, end):
    """(t, fraction of the rate) for each WINDOW from start to end (absolute times)."""
    times = [r[0] for r in rows]
    out = []
    t = start
    while t + WINDOW <= end:
        i = min(bisect.bisect_left(times, t), len(rows) - 1)
        j = min(bisect.bisect_left(times, t + WINDOW), len(rows) - 1)
        dt = rows[j][0] - rows[i][0]
        out.append((t, (rows[j][col] - rows[i][col]) / dt / rate_bytes if dt > 0 else 0.0))
        t += WINDOW
    return out


def parse_hosts(args):
    hosts = []
    for a in args:
        name, _, path = a.partition("=")
        if not path:
            sys.exit("link_trace: want NAME=FILE, got %r" % a)
        hosts.append((name, load(path)))
    return hosts


def active_span(hosts):
    """From the first to the last window in which some host moved over 100 KB/s: the
    processes' start-up and the final evaluation do not dilute the figures."""
    start = max(rows[0][0] for _, rows in hosts)
    end = min(rows[-1][0] for _, rows in hosts)
    first, last = None, None
    for _, rows in hosts:
        for col in (1, 2):
            for t, f in windows(rows, col, 1.0, start, end):
                if f <= 1e5:
                    continue
                first = t if first is None else min(first, t)
                last = t if last is None else max(last, t)
    return (first, last + WINDOW) if first is not None else (start, end)


def summary(rate_bits, host_args):
    rate = rate_bits / 8.0
    hosts = parse_hosts(host_args)
    start, end = active_span(hosts)
    print("links over %.1f s of traffic (%d ms windows; busy: above %d%% of the rate):"
          % (end - start, WINDOW * 1000, BUSY * 100))
    for name, rows in hosts:
        parts = []
        for label, col in (("sent", 1), ("received", 2)):
            w = [f for _, f in windows(rows, col, rate, start, end)]
            mean = sum(w) / len(w) if w else 0.0
            busy = sum(1 for f in w if f > BUSY) / len(w) if w else 0.0
            parts.append("%s %.1f%% of the rate (busy %.1f%% of the time)" % (label, 100 * mean, 100 * busy))
        print("  %-9s %s" % (name, "; ".join(parts)))


def timeline(rate_bits, t_from, t_to, host_args):
    rate = rate_bits / 8.0
    hosts = parse_hosts(host_args)
    t0 = max(rows[0][0] for _, rows in hosts)
    cols = []
    for name, rows in hosts:
        for label, col in (("tx", 1), ("rx", 2)):
            cols.append(("%s.%s" % (name, label), windows(rows, col, rate, t0 + t_from, t0 + t_to)))
    print("     t " + " ".join("%10s" % c for c, _ in cols))
    for k in range(min(len(w) for _, w in cols)):
        print("%6.2f " % (cols[0][1][k][0] - t0) + " ".join("%10.2f" % w[k][1] for _, w in cols))


def main(argv):
    if len(argv) >= 2 and argv[0] == "sample":
        seconds = float(argv[3]) if len(argv) >= 4 and argv[2] == "--seconds" else None
        sample(argv[1], seconds)
    elif len(argv) >= 3 and argv[0] == "summary":
        summary(float(argv[1]), argv[2:])
    elif len(argv) >= 5 and argv[0] == "timeline":
        timeline(float(argv[1]), float(argv[2]), float(argv[3]), argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
