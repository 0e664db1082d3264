#!/usr/bin/env python3
"""Generates the simulated driver's cuGetProcAddress table.

The table is derived from the toolkit headers, never written by hand:

* cudaTypedefs.h (and its siblings cudaProfilerTypedefs.h, cudaGLTypedefs.h,
  cudaEGLTypedefs.h, cudaVDPAUTypedefs.h when present) has one
  `PFN_<name>_v<version>[_ptds|_ptsz]` typedef per ABI version of each driver
  entry point, including the legacy ones under __CUDA_API_VERSION_INTERNAL.
* The i-th (0-based) normal version of <name> is the symbol `name` for i = 0
  and `name_v{i+1}` otherwise. A per-thread typedef of version V belongs to the
  newest normal version <= V, and its symbol is that one's plus _ptds/_ptsz.
* Every computed symbol is checked against the functions cuda.h (or the
  sibling header) declares, legacy ones included, and against its
  `#define cuX cuX_vN` / `__CUDA_API_PTDS(...)` lines, which name the newest
  version. Where the rule and the header disagree the header wins and the
  exception is printed as a warning; a symbol the header does not declare is
  printed too. Only an impossible mapping (a per-thread version older than
  every normal one, one symbol for two entries) fails the build.

The entry points the sim implements are found in its api_*.cc sources: one
line `SIM_EXPORT CUresult CUDAAPI cuName(`. Known-but-unimplemented entries
get a null function, which api_procaddress.cc turns into a NOT_SUPPORTED stub,
and are exported by the sim as aliases of one such stub, so that the sim's
libcuda.so.1 exports every symbol a real driver (and its stub) does.

Output: a C++ .inc (see driver/proc_table.h for the entry type).
Also: --check-stub LIB compares the derived symbols with `nm -D LIB`;
--check-cudart LIB checks that the table knows every name a libcudart uses.
"""

import argparse
import os
import re
import subprocess
import sys

NORMAL, PTDS, PTSZ = 0, 1, 2
VARIANT_SUFFIX = {NORMAL: "", PTDS: "_ptds", PTSZ: "_ptsz"}

# Sibling typedef headers and the header that declares their functions.
SIBLINGS = [
    ("cudaProfilerTypedefs.h", "cudaProfiler.h"),
    ("cudaGLTypedefs.h", "cudaGL.h"),
    ("cudaEGLTypedefs.h", "cudaEGL.h"),
    ("cudaVDPAUTypedefs.h", "cudaVDPAU.h"),
]

PFN_RE = re.compile(r"\bPFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\s*\)")
DECL_RE = re.compile(r"\bCUresult\s+CUDAAPI\s+(cu\w+)\s*\(")
DEFINE_RE = re.compile(
    r"^\s*#\s*define\s+(cu\w+)\s+(?:__CUDA_API_(PTDS|PTSZ)\(\s*(cu\w+)\s*\)|(cu\w+))\s*$",
    re.MULTILINE)
UNDEF_RE = re.compile(r"^\s*#\s*undef\s+cu\w+", re.MULTILINE)
IMPL_OR_UNDEF_RE = re.compile(
    r"^[ \t]*#[ \t]*undef[ \t]+(cu\w+)|^[ \t]*SIM_EXPORT\s+CUresult\s+CUDAAPI\s+(cu\w+)\s*\(",
    re.MULTILINE)
INTERNAL_RE = re.compile(r"^\s*#\s*define\s+__CUDA_API_VERSION_INTERNAL\b", re.MULTILINE)
WINDOWS_IF_RE = re.compile(r"^\s*#\s*(?:ifdef\s+_WIN32|if\s+defined\s*\(?\s*_WIN32\s*\)?)\s*$")


def strip_windows(text):
    """Drops `#ifdef _WIN32` branches (cuWGLGetDevice): a Linux driver has none."""
    out, stack = [], []  # stack of "this #if level is a dropped Windows branch"
    for line in text.splitlines():
        directive = re.match(r"^\s*#\s*(\w+)", line)
        word = directive.group(1) if directive else ""
        if word in ("if", "ifdef", "ifndef"):
            stack.append(bool(WINDOWS_IF_RE.match(line)))
            continue
        if word in ("else", "elif") and stack:
            stack[-1] = False if stack[-1] else stack[-1]
            continue
        if word == "endif" and stack:
            stack.pop()
            continue
        if not any(stack):
            out.append(line)
    return "\n".join(out)


def read_text(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return strip_windows(re.sub(r"//[^\n]*", "", text))


class Header:
    """What one API header declares, seen as the driver build sees it."""

    def __init__(self, path):
        text = strip_comments(read_text(path))
        # The first `#undef cuX` starts the __CUDA_API_VERSION_INTERNAL legacy
        # section: before it the #defines rename declarations, after it not.
        m = UNDEF_RE.search(text)
        body, legacy = (text[:m.start()], text[m.start():]) if m else (text, "")
        # name -> (target, variant): `#define cuX cuX_v2` or `__CUDA_API_PTDS(cuX_v2)`.
        self.defines = {}
        for d in DEFINE_RE.finditer(body):
            kind = {"PTDS": PTDS, "PTSZ": PTSZ}.get(d.group(2), NORMAL)
            self.defines[d.group(1)] = (d.group(3) or d.group(4), kind)
        self.declared = set()
        for d in DECL_RE.finditer(body):
            self.declared.add(self.expand(d.group(1), internal=True))
        for d in DECL_RE.finditer(legacy):
            self.declared.add(d.group(1))

    def expand(self, name, internal):
        """The symbol a use of `name` compiles to (internal: __CUDA_API_VERSION_INTERNAL)."""
        if name not in self.defines:
            return name
        target, kind = self.defines[name]
        return target + VARIANT_SUFFIX[kind] if internal else target


def parse_typedefs(path):
    """{name: {variant: sorted [versions]}} from PFN_ typedefs."""
    text = strip_comments(read_text(path))
    out = {}
    for m in PFN_RE.finditer(text):
        variant = {None: NORMAL, "_ptds": PTDS, "_ptsz": PTSZ}[m.group(3)]
        out.setdefault(m.group(1), {}).setdefault(variant, set()).add(int(m.group(2)))
    return {n: {v: sorted(s) for v, s in vs.items()} for n, vs in out.items()}


def rule_symbol(name, normal_versions, version, variant):
    """Symbol by the naming rule; None if a per-thread version has no normal one."""
    index = max((i for i, v in enumerate(normal_versions) if v <= version), default=None)
    if index is None:
        return None
    base = name if index == 0 else "%s_v%d" % (name, index + 1)
    return base + VARIANT_SUFFIX[variant]


def define_claims(name, header):
    """What cuda.h's `#define name ...` says about name's symbols.

    `#define cuX cuX_vN` names the newest normal symbol; `#define cuX
    __CUDA_API_PTDS(cuX_vN)` also names its per-thread variant. A #define to a
    different function (cuGraphInstantiate -> cuGraphInstantiateWithFlags) is a
    source-level redirect, not an ABI version: it claims nothing.
    """
    if name not in header.defines:
        return None, None
    target, kind = header.defines[name]
    if target != name and not target.startswith(name + "_v"):
        return None, None
    newest = target if target != name else None
    return newest, (target, kind) if kind != NORMAL else None


def derive(name, versions, header, notes):
    """[(version, variant, symbol)] for one base name; appends to notes."""
    normal = versions.get(NORMAL, [])
    if not normal:
        notes.append(("error", "%s: per-thread typedefs but no normal version" % name))
        return []
    rows = []
    for variant in (NORMAL, PTDS, PTSZ):
        for version in versions.get(variant, []):
            rows.append([version, variant, rule_symbol(name, normal, version, variant)])
    newest, per_thread = define_claims(name, header)
    if newest is not None:
        row = [r for r in rows if r[1] == NORMAL][-1]
        if row[2] != newest:
            notes.append(("exception", "%s@%d: rule gives %s, cuda.h #define says %s" %
                          (name, row[0], row[2], newest)))
            row[2] = newest
    if per_thread is not None:
        base, kind = per_thread
        # The per-thread row paired with normal symbol `base` must be base_ptxx.
        base_rows = [r for r in rows if r[1] == NORMAL and r[2] == base]
        paired = [r for r in rows if r[1] == kind and base_rows and
                  rule_symbol(name, normal, r[0], NORMAL) == rule_symbol(
                      name, normal, base_rows[0][0], NORMAL)]
        want = base + VARIANT_SUFFIX[kind]
        if not paired:
            notes.append(("exception", "%s: cuda.h #define names %s but no %s typedef pairs "
                          "with %s" % (name, want, VARIANT_SUFFIX[kind][1:], base)))
        for r in paired:
            if r[2] != want:
                notes.append(("exception", "%s@%d%s: rule gives %s, cuda.h #define says %s" %
                              (name, r[0], VARIANT_SUFFIX[kind], r[2], want)))
                r[2] = want
    for version, variant, symbol in rows:
        if symbol is None:
            notes.append(("error", "%s@%d%s: no normal version at or below it" %
                          (name, version, VARIANT_SUFFIX[variant])))
        elif symbol not in header.declared:
            notes.append(("undeclared", "%s@%d%s -> %s is not declared in the header" %
                          (name, version, VARIANT_SUFFIX[variant], symbol)))
    return [tuple(r) for r in rows if r[2] is not None]


def scan_sources(paths, cuda_header):
    """Implemented symbols: {symbol: source path}.

    Emulates what the preprocessor does to each definition: cuda.h's
    `#define cuX cuX_v2` renames `cuX` unless the file defined
    __CUDA_API_VERSION_INTERNAL (cuda.h then #undefs them at its end) or
    itself did `#undef cuX` before the definition.
    """
    impl = {}
    for path in paths:
        text = read_text(path)
        internal = bool(INTERNAL_RE.search(text))
        undefined = set()
        # In source order, so that an #undef applies to the definitions after
        # it; a definition may be wrapped over several lines (clang-format).
        for m in IMPL_OR_UNDEF_RE.finditer(text):
            if m.group(1):
                undefined.add(m.group(1))
                continue
            name = m.group(2)
            literal = internal or name in undefined
            impl[name if literal else cuda_header.expand(name, internal=False)] = path
    return impl


def build_table(args):
    cuda_header = Header(args.cuda_h)
    sources = [(args.typedefs, cuda_header)]
    inc_dir = os.path.dirname(os.path.abspath(args.typedefs))
    if not args.no_siblings:
        for typedefs, declaring in SIBLINGS:
            t, d = os.path.join(inc_dir, typedefs), os.path.join(inc_dir, declaring)
            if os.path.exists(t) and os.path.exists(d):
                sources.append((t, Header(d)))
    rows, notes, seen = [], [], {}
    for typedefs, header in sources:
        for name, versions in sorted(parse_typedefs(typedefs).items()):
            if name in seen:
                notes.append(("error", "%s typed in both %s and %s" % (name, seen[name], typedefs)))
                continue
            seen[name] = typedefs
            rows += [(name, v, var, sym) for v, var, sym in derive(name, versions, header, notes)]
    symbols = [r[3] for r in rows]
    for dup in sorted({s for s in symbols if symbols.count(s) > 1}):
        notes.append(("error", "symbol %s derived for more than one (name, version)" % dup))
    declared_untyped = sorted(s for s in cuda_header.declared
                              if s not in set(symbols) and not s.startswith("cuGetProcAddress"))
    return sorted(rows), notes, declared_untyped


def emit(path, rows, impl, cuda_version):
    lines = [
        "// Generated by driver/tools/gen_proc_table.py from the toolkit's cuda.h and",
        "// cudaTypedefs.h (CUDA_VERSION %s) and the sim's api_*.cc. Do not edit." % cuda_version,
        "// Needs driver/proc_table.h. An includer may define VGPU_PROC_FN(sym) itself (tests",
        "// do); by default it is the address of the sim's entry point `sym`, bound by",
        "// assembler name so that cuda.h's #define cuX cuX_v2 macros cannot rename it.",
        "// VGPU_PROC_STUB(sym) is the same for the exported NOT_SUPPORTED stub of an",
        "// entry point the sim lacks (nullptr where VGPU_PROC_FN is the includer's).",
        "#ifndef VGPU_PROC_FN",
        "extern \"C\" {",
    ]
    implemented = sorted({r[3] for r in rows if r[3] in impl})
    for sym in implemented:
        lines.append("__attribute__((visibility(\"default\"))) void vgpu_proc_sym_%s() "
                     "__asm__(\"%s\");" % (sym, sym))
    # A real driver exports every entry point, and clients that bind them all
    # at start (ctypes, dlsym loops) fail on a missing one: the sim exports the
    # ones it lacks too, as aliases of one CUDA_ERROR_NOT_SUPPORTED stub.
    missing = sorted({r[3] for r in rows if r[3] not in impl})
    lines.append("// Callers pass their real arguments; a callee that ignores them is harmless")
    lines.append("// under the SysV calling conventions (the caller owns its stack).")
    lines.append("CUresult CUDAAPI vgpu_proc_not_supported() { return CUDA_ERROR_NOT_SUPPORTED; }")
    for sym in missing:
        lines.append("__attribute__((visibility(\"default\"), alias(\"vgpu_proc_not_supported\"))) "
                     "CUresult CUDAAPI vgpu_proc_stub_%s() __asm__(\"%s\");" % (sym, sym))
    lines += [
        "}  // extern \"C\"",
        "#define VGPU_PROC_FN(sym) reinterpret_cast<void*>(&vgpu_proc_sym_##sym)",
        "#define VGPU_PROC_STUB(sym) reinterpret_cast<void*>(&vgpu_proc_stub_##sym)",
        "#endif",
        "#ifndef VGPU_PROC_STUB",
        "#define VGPU_PROC_STUB(sym) nullptr",
        "#endif",
        "",
        "namespace vgpu::driver {",
        "// Sorted by (name, version, variant); %d entries, %d implemented." % (
            len(rows), sum(1 for r in rows if r[3] in impl)),
        "inline constexpr int kProcDriverVersion = %s;" % cuda_version,
        "static const ProcEntry kProcTable[] = {",
    ]
    for name, version, variant, sym in rows:
        fn = ("VGPU_PROC_FN(%s)" if sym in impl else "VGPU_PROC_STUB(%s)") % sym
        lines.append('    {"%s", %d, %d, "%s", %s},' % (name, version, variant, sym, fn))
    lines += ["};", "}  // namespace vgpu::driver", "#undef VGPU_PROC_FN", "#undef VGPU_PROC_STUB", ""]
    text = "\n".join(lines)
    # Rewrite only on change so that dependents are not rebuilt needlessly.
    if os.path.exists(path) and read_text(path) == text:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def check_stub(lib, rows, core_symbols):
    """Compares the derived symbols with a (stub) libcuda's exports.

    Fails if the library exports a symbol the table cannot reach, or if the
    table derives from cudaTypedefs.h a symbol the library lacks. The stub has
    no graphics-interop entry points; those are listed but do not fail.
    """
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print("gen_proc_table: cannot run nm on %s: %s" % (lib, e), file=sys.stderr)
        return 2
    exported = {f[-1] for f in (l.split() for l in out.splitlines()) if f and f[-1].startswith("cu")}
    derived = {r[3] for r in rows}
    only_stub = sorted(exported - derived)
    only_core = sorted(core_symbols - exported)
    interop = sorted(derived - core_symbols - exported)
    print("%s exports %d cu* symbols; the table derives %d (%d from cudaTypedefs.h)" %
          (lib, len(exported), len(derived), len(core_symbols)))
    print("exported but not in the table (%d): %s" % (len(only_stub), " ".join(only_stub)))
    print("from cudaTypedefs.h but not exported (%d): %s" % (len(only_core), " ".join(only_core)))
    print("interop entries the stub lacks (%d, expected): %s" % (len(interop), " ".join(interop)))
    return 1 if only_stub or only_core else 0


def check_cudart(lib, rows):
    """Checks that every driver name a libcudart resolves is in the table.

    cudart keeps the names it asks cuGetProcAddress for (base names) and the
    symbols it may dlsym (versioned ones) as plain strings.
    """
    with open(lib, "rb") as f:
        data = f.read()
    wanted = {m.group(1).decode() for m in re.finditer(rb"\0(cu[A-Z]\w{2,})(?=\0)", data)}
    known = {r[0] for r in rows} | {r[3] for r in rows}
    missing = sorted(wanted - known)
    print("%s names %d driver entry points; not in the table (%d): %s" %
          (lib, len(wanted), len(missing), " ".join(missing)))
    return 1 if missing or not wanted else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cuda-h", required=True)
    p.add_argument("--typedefs", required=True)
    p.add_argument("--out")
    p.add_argument("--no-siblings", action="store_true",
                   help="only cudaTypedefs.h, not the profiler/GL/EGL/VDPAU typedef headers")
    p.add_argument("--check-stub", metavar="LIB", help="compare with the exports of LIB and exit")
    p.add_argument("--check-cudart", metavar="LIB",
                   help="check that the table knows every name LIB (libcudart) uses, and exit")
    p.add_argument("--list", action="store_true", help="print the table as text and exit")
    p.add_argument("--verbose", action="store_true",
                   help="also list cuda.h functions that have no PFN typedef")
    p.add_argument("sources", nargs="*", help="the sim's api_*.cc files")
    args = p.parse_args()

    rows, notes, declared_untyped = build_table(args)
    if args.check_stub:
        core = build_table(argparse.Namespace(**dict(vars(args), no_siblings=True)))[0]
        return check_stub(args.check_stub, rows, {r[3] for r in core})
    if args.check_cudart:
        return check_cudart(args.check_cudart, rows)
    if args.list:
        for name, version, variant, sym in rows:
            print("%s %d %s %s" % (name, version, ("normal", "ptds", "ptsz")[variant], sym))
        return 0

    cuda_version = re.search(r"#define\s+CUDA_VERSION\s+(\d+)",
                             read_text(args.cuda_h))
    impl = scan_sources(args.sources, Header(args.cuda_h))
    errors = [n for k, n in notes if k == "error"]
    exceptions = [n for k, n in notes if k == "exception"]
    undeclared = [n for k, n in notes if k == "undeclared"]
    for n in exceptions:
        print("gen_proc_table: warning: naming-rule exception: %s" % n, file=sys.stderr)
    for n in undeclared:
        print("gen_proc_table: warning: naming rule unconfirmed: %s" % n, file=sys.stderr)
    if args.verbose and declared_untyped:
        print("gen_proc_table: note: declared in cuda.h without a PFN typedef (not in the "
              "table): %s" % " ".join(declared_untyped), file=sys.stderr)
    unreachable = sorted(s for s in impl if s not in {r[3] for r in rows})
    for s in unreachable:
        print("gen_proc_table: warning: %s (%s) is exported but no cuGetProcAddress entry names "
              "it" % (s, os.path.basename(impl[s])), file=sys.stderr)
    for n in errors:
        print("gen_proc_table: error: %s" % n, file=sys.stderr)
    if errors:
        return 1
    if not args.out:
        p.error("--out is required")
    emit(args.out, rows, impl, cuda_version.group(1) if cuda_version else "0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
