#!/usr/bin/env python3
"""sim/tools/gen_error_table.py creates its output directory.

Run by ctest (proc_table.cmake) as: gen_error_table_test.py GENERATOR CUDA_H.
In a fresh build tree Ninja may run the generator before anything else has
created build/sim/generated/ (a random failure of `-j2` builds).
"""
import os
import subprocess
import sys
import tempfile


def main():
    generator, cuda_h = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sim", "generated", "error_table.inc")
        run = subprocess.run([sys.executable, generator, cuda_h, out], capture_output=True, text=True)
        if run.returncode != 0:
            print("generator failed (%d): %s" % (run.returncode, run.stderr.strip()))
            return 1
        text = open(out, encoding="utf-8").read()
        if '{0, "CUDA_SUCCESS"' not in text or '"CUDA_ERROR_NOT_SUPPORTED"' not in text:
            print("unexpected output:\n" + text[:500])
            return 1
    print("ok: output directory created, table written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
