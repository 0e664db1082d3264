#!/usr/bin/env python3
"""Checks that the source tree's #include edges point down the layers of
docs/architecture.md and ../shared/design.md ("Layers"): nothing includes a
layer above it, and the product never includes the simulator (sim/, or a file
sim/ generates).

Today's known violations are listed in KNOWN; the restructuring of issue 12
removes them. The check fails on any violation not listed AND on a listed one
that no longer occurs, so the list can only shrink.

    check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

# What each directory may include (by the first path component of a quoted
# include). "executables" may include every layer below them.
ALLOWED = {
    "common": {"common"},
    "driver": {"driver", "common"},
    "checkpoint": {"checkpoint", "common", "driver"},
    "vmm": {"vmm", "common", "driver"},
    "ctl": {"ctl", "common"},
    "intercept": {"intercept", "vmm", "checkpoint", "ctl", "common", "driver"},
    "sim": {"sim", "common", "driver", "vgpu"},  # vgpu/: sim/include, the kernel ABI
}
PRODUCT = {"common", "driver", "checkpoint", "vmm", "ctl", "intercept"}
# Directories an include may name; tests, benchmarks and samples sit above all.
KNOWN_DIRS = set(ALLOWED) | {"vgpu", "tests", "bench", "samples"}
# Headers generated at build time, by the layer that owns them.
GENERATED = {"proc_table.inc": "driver", "error_table.inc": "sim"}

KNOWN = set()  # issue 12 removed the last known violation

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    text = path.read_text(errors="replace")
    return INCLUDE.findall(text)


def layer_of_include(inc, own_layer):
    if inc in GENERATED:
        return GENERATED[inc]
    if "/" not in inc:
        return own_layer  # a file of the same directory
    return inc.split("/", 1)[0]


def violations(root):
    found = set()
    for layer, allowed in ALLOWED.items():
        base = root / layer
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in {".h", ".cc", ".inc"} or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            for inc in includes(path):
                target = layer_of_include(inc, layer)
                bad = target in KNOWN_DIRS and target not in allowed
                if layer in PRODUCT and target == "sim":
                    bad = True
                if bad:
                    found.add((rel, inc))
    return found


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    found = violations(root)
    new = sorted(found - KNOWN)
    gone = sorted(KNOWN - found)
    for rel, inc in new:
        print(f"LAYER VIOLATION: {rel} includes {inc}")
    for rel, inc in gone:
        print(f"FIXED (remove it from KNOWN in {__file__}): {rel} no longer includes {inc}")
    print(f"{len(found)} violations, {len(KNOWN)} known, {len(new)} new, {len(gone)} gone")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
