#!/usr/bin/env python3
"""Shares over a window from two node_busy readings (podman_test.sh share).

share_window.py BEFORE AFTER KEY... prints each KEY's share of wall time in
percent, one line; a KEY is "ns:<pid namespace inode>" (a container, or the
host) or "pid:<pid>" (a process of the host's namespace). With --handovers
first, prints instead: lease changes per second, and the engine's idle time
per lease change in microseconds (what a hand-over costs the device)."""
import sys


def read(path):
    d = {"busy": {}}
    for line in open(path):
        f = line.split()
        if f[0] == "now":
            d["now"] = int(f[1])
        elif f[0] == "ns":
            d["busy"]["ns:" + f[1]] = int(f[2])
        elif f[0] == "pid":
            d["busy"]["pid:" + f[2]] = int(f[3])
        elif f[0] == "lease_changes":
            d["gen"] = int(f[1])
    return d


args = sys.argv[1:]
handovers = args[0] == "--handovers"
if handovers:
    args = args[1:]
s1, s2 = read(args[0]), read(args[1])
wall = s2["now"] - s1["now"]
used = {k: s2["busy"].get(k, 0) - s1["busy"].get(k, 0) for k in args[2:]}
if handovers:
    changes = s2["gen"] - s1["gen"]
    idle = wall - sum(used.values())
    print("%.0f %.0f" % (changes * 1e9 / wall, idle / 1e3 / max(changes, 1)))
else:
    print(" ".join("%.1f" % (100.0 * used[k] / wall) for k in args[2:]))
