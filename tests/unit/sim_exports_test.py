#!/usr/bin/env python3
"""Every symbol a driver stub library exports is exported by the sim's build.

Run by ctest (proc_table.cmake) as: sim_exports_test.py STUB SIM, e.g. the
toolkit's stubs/libcuda.so and the simulated libcuda.so.1. A real driver
exports at least what its stub does, and clients that bind every entry point
at start (ctypes wrappers, dlsym loops) fail on the first one missing.
"""
import subprocess
import sys


def exports(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    return {f[-1].split("@")[0] for f in (l.split() for l in out.splitlines()) if len(f) >= 2}


def main():
    stub, sim = sys.argv[1], sys.argv[2]
    want, have = exports(stub), exports(sim)
    missing = sorted(want - have)
    print("%s exports %d symbols, %s %d; missing from the sim: %d" %
          (stub, len(want), sim, len(have), len(missing)))
    for name in missing:
        print("  missing: %s" % name)
    return 1 if missing or not want else 0


if __name__ == "__main__":
    sys.exit(main())
