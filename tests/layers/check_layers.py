#!/usr/bin/env python3
"""Checks that the source tree's #include edges point down the layers of
docs/architecture.md and ../shared/design.md ("Layers"): nothing includes a
layer above it, and the product never includes the simulator (sim/, or a file
sim/ generates).

Today's known violations are listed in KNOWN; the restructuring of issue 12
removed them. It also fails on an include cycle between components (a .h/.cc
pair) not in KNOWN_CYCLES. The check fails on any violation not listed AND on a listed one
that no longer occurs, so the list can only shrink.

    check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

# What each directory may include (by the first path component of a quoted
# include). "executables" may include every layer below them.
# A layer is a directory, or a directory inside one ("ctl/control"): a file or
# an include belongs to the longest layer its path starts with.
ALLOWED = {
    "common": {"common"},
    "driver": {"driver", "common"},
    "checkpoint": {"checkpoint", "common", "driver"},
    "vmm": {"vmm", "common", "driver"},
    # The control library (protocol, agent server, client, run directory): no CUDA.
    "ctl/control": {"ctl/control", "common"},
    # The thin executables: vgpuctl, and vgpud (which reads the node's GPUs
    # through the driver layer's NVML table).
    # vgpuctl migrate: the shared migration sequence, the node's GPUs.
    "ctl": {"ctl", "ctl/control", "ctl/cdi", "ctl/migrate", "share", "quota", "common", "driver"},
    # The migration sequence (docs/migration.md): agents plus the driver's
    # checkpoint API, shared by vgpuctl and vgpud.
    "ctl/migrate": {"ctl/migrate", "ctl/control", "common", "driver"},
    # The container hook: runs as root on the host for every container, so it
    # stays small: the option parsers of common/config, no CUDA, no CDI code.
    "ctl/oci_hook": {"ctl/oci_hook", "ctl/control", "common"},
    # The CDI spec library: lists the GPUs through the driver layer's NVML table.
    "ctl/cdi": {"ctl/cdi", "common", "driver"},
    "ctl/vgpud": {"ctl/vgpud", "ctl/control", "ctl/migrate", "share", "common", "driver"},
    # Cluster integrations (the Kubernetes DRA driver's API-server side): the
    # CDI spec and control libraries below them, no CUDA state of their own.
    "cluster": {"cluster", "ctl/cdi", "ctl/control", "share", "common", "driver"},
    # Mechanisms below libvgpu: the compute share (the node's scheduler region
    # and a process's accountant, given a ShareHost) and the quota ledger.
    "share": {"share", "common"},
    "quota": {"quota", "common"},
    # Residency (suspend, resume, checkpoint, restore, the quiesce gate): moves
    # the VMM manager's memory through the driver table it is given.
    "residency": {"residency", "vmm", "checkpoint", "share", "quota", "common", "driver"},
    "intercept": {"intercept", "residency", "vmm", "checkpoint", "share", "quota", "ctl/control",
                  "common", "driver"},
    # The simulated node (docs/sim.md, "Source map"), bottom up. vgpu/: sim/include,
    # the kernel ABI. node/: the node region both libraries share.
    "sim": {"sim", "common", "driver", "vgpu"},
    "sim/node": {"sim/node", "common"},
    # Module images, their readers and the kernels that run: no driver state.
    "sim/modules": {"sim/modules", "common", "vgpu"},
    # The device's behaviour: contexts, memory, streams, events, graphs.
    "sim/engine": {"sim/engine", "sim/modules", "sim/node", "common", "driver", "vgpu"},
    # The exported entry points, over everything else of libcuda.
    "sim/api": {"sim/api", "sim/engine", "sim/modules", "sim/node", "common", "driver", "vgpu"},
    "sim/nvml": {"sim/nvml", "sim/node", "common", "driver"},
}
PRODUCT = {"common", "driver", "checkpoint", "vmm", "share", "quota", "residency", "ctl/control", "ctl", "ctl/cdi", "ctl/vgpud", "ctl/migrate",
           "ctl/oci_hook", "intercept", "cluster"}
# Directories an include may name; tests, benchmarks and samples sit above all.
KNOWN_DIRS = set(ALLOWED) | {"vgpu", "tests", "bench", "samples"}
# Headers generated at build time, by the layer that owns them.
GENERATED = {"proc_table.inc": "driver", "error_table.inc": "sim/api"}

KNOWN = set()  # issue 12 removed the last known violation

# Include cycles between components (a component is a .h/.cc pair: x.h and
# x.cc are one node; an edge is a quoted include of another component's
# header). Today's cycles, each a set of components; a cycle may only shrink
# or go (issue 28), and the list must then be updated, as KNOWN above.
KNOWN_CYCLES = [
    {"common/config/ceilings", "common/config/config", "common/config/config_file",
     "common/config/option_table"},
    {"ctl/cdi/cdi_host", "ctl/cdi/library_deps"},
    {"sim/modules/builtin_kernels", "sim/modules/cubin_reader", "sim/modules/module_image",
     "sim/modules/ptx_reader"},
    {"sim/engine/context", "sim/engine/function_attributes", "sim/engine/graph",
     "sim/engine/module", "sim/engine/module_registry", "sim/engine/stream"},
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    text = path.read_text(errors="replace")
    return INCLUDE.findall(text)


def layer_of_path(path):
    """The longest layer `path` (a/b/c.h) lies in, else its first component."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:n])
        if prefix in ALLOWED:
            return prefix
    return parts[0]


def layer_of_include(inc, own_layer):
    if inc in GENERATED:
        return GENERATED[inc]
    if "/" not in inc:
        return own_layer  # a file of the same directory
    return layer_of_path(inc)


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
            if layer_of_path(rel) != layer:
                continue  # a nested layer's file, checked as that layer
            for inc in includes(path):
                target = layer_of_include(inc, layer)
                bad = target in KNOWN_DIRS and target not in allowed
                if layer in PRODUCT and (target == "sim" or target.startswith("sim/")):
                    bad = True
                if bad:
                    found.add((rel, inc))
    return found


def component_graph(root):
    edges = {}
    for layer in ALLOWED:
        base = root / layer
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if path.suffix not in {".h", ".cc"} or not path.is_file():
                continue
            comp = path.relative_to(root).with_suffix("").as_posix()
            for inc in includes(path):
                target = inc.rsplit(".", 1)[0]
                if inc.endswith(".h") and (root / inc).is_file() and target != comp:
                    edges.setdefault(comp, set()).add(target)
    return edges


def cycles(root):
    """The strongly connected components of more than one node (Tarjan)."""
    edges = component_graph(root)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def check_cycles(root):
    found = cycles(root)
    bad = 0
    for scc in found:
        if not any(scc <= known for known in KNOWN_CYCLES):
            print("INCLUDE CYCLE: " + " -> ".join(sorted(scc)))
            bad += 1
    for known in KNOWN_CYCLES:
        if known not in found:
            print(f"CYCLE SHRANK OR GONE (update KNOWN_CYCLES in {__file__}): " +
                  " ".join(sorted(known)))
            bad += 1
    print(f"{len(found)} include cycles between components, {len(KNOWN_CYCLES)} known, "
          f"{bad} to look at")
    return bad


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    bad_cycles = check_cycles(root)
    found = violations(root)
    new = sorted(found - KNOWN)
    gone = sorted(KNOWN - found)
    for rel, inc in new:
        print(f"LAYER VIOLATION: {rel} includes {inc}")
    for rel, inc in gone:
        print(f"FIXED (remove it from KNOWN in {__file__}): {rel} no longer includes {inc}")
    print(f"{len(found)} violations, {len(KNOWN)} known, {len(new)} new, {len(gone)} gone")
    return 1 if new or gone or bad_cycles else 0


if __name__ == "__main__":
    sys.exit(main())
