#!/usr/bin/env python3
"""The derivation rules of driver/tools/gen_proc_table.py on small synthetic headers.

Run by ctest (proc_table.cmake) as: gen_proc_table_test.py <path of gen_proc_table.py>.
"""

import importlib.util
import os
import sys
import tempfile
import unittest

GEN = None  # the generator module, loaded in main

CUDA_H = """
#define __CUDA_API_PTDS(api) api
#define cuMemAlloc cuMemAlloc_v2
#define cuMemcpyHtoD __CUDA_API_PTDS(cuMemcpyHtoD_v2)
#define cuRenamed cuRenamed_v3
#define cuRedirect cuSomethingElse
#if defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
    #define cuLaunchKernel __CUDA_API_PTSZ(cuLaunchKernel)
#endif
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n);
CUresult CUDAAPI cuLaunchKernel(CUfunction f);
CUresult CUDAAPI cuRenamed(int x);
CUresult CUDAAPI cuRedirect(int x);
#ifdef _WIN32
CUresult CUDAAPI cuWindowsOnly(void);
#endif
#if defined(__CUDA_API_VERSION_INTERNAL)
    #undef cuMemAlloc
    #undef cuMemcpyHtoD
    #undef cuRenamed
    #undef cuRedirect
    CUresult CUDAAPI cuMemAlloc(unsigned int *dptr, unsigned int bytesize);
    CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
    CUresult CUDAAPI cuMemcpyHtoD(unsigned int dst, const void *src, unsigned int n);
    CUresult CUDAAPI cuRenamed(int x);
    CUresult CUDAAPI cuRedirect(int x);
#endif
"""

TYPEDEFS = """
typedef CUresult (CUDAAPI *PFN_cuInit_v2000)(unsigned int Flags);
typedef CUresult (CUDAAPI *PFN_cuMemAlloc_v3020)(CUdeviceptr_v2 *dptr, size_t bytesize);
typedef CUresult (CUDAAPI *PFN_cuMemcpyHtoD_v7000_ptds)(CUdeviceptr_v2 dst, const void *s, size_t n);
typedef CUresult (CUDAAPI *PFN_cuMemcpyHtoD_v3020)(CUdeviceptr_v2 dst, const void *s, size_t n);
typedef CUresult (CUDAAPI *PFN_cuLaunchKernel_v4000)(CUfunction f);
typedef CUresult (CUDAAPI *PFN_cuLaunchKernel_v7000_ptsz)(CUfunction f);
typedef CUresult (CUDAAPI *PFN_cuRenamed_v5000)(int x);
typedef CUresult (CUDAAPI *PFN_cuRedirect_v5000)(int x);
#ifdef _WIN32
typedef CUresult (CUDAAPI *PFN_cuWindowsOnly_v2000)(void);
#endif
#if defined(__CUDA_API_VERSION_INTERNAL)
    typedef CUresult (CUDAAPI *PFN_cuMemAlloc_v2000)(unsigned int *dptr, unsigned int bytesize);
    typedef CUresult (CUDAAPI *PFN_cuMemcpyHtoD_v2000)(unsigned int d, const void *s, unsigned n);
#endif
"""


class Derivation(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cuda_h = self.write("cuda.h", CUDA_H)
        self.typedefs = self.write("cudaTypedefs.h", TYPEDEFS)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def table(self):
        import argparse
        args = argparse.Namespace(cuda_h=self.cuda_h, typedefs=self.typedefs, no_siblings=True)
        rows, notes, _ = GEN.build_table(args)
        return {(n, v, var): s for n, v, var, s in rows}, notes

    def test_versions_per_thread_and_legacy(self):
        t, _ = self.table()
        self.assertEqual(t[("cuMemAlloc", 2000, GEN.NORMAL)], "cuMemAlloc")
        self.assertEqual(t[("cuMemAlloc", 3020, GEN.NORMAL)], "cuMemAlloc_v2")
        self.assertEqual(t[("cuMemcpyHtoD", 7000, GEN.PTDS)], "cuMemcpyHtoD_v2_ptds")
        self.assertEqual(t[("cuLaunchKernel", 7000, GEN.PTSZ)], "cuLaunchKernel_ptsz")
        self.assertEqual(t[("cuInit", 2000, GEN.NORMAL)], "cuInit")

    def test_windows_only_entries_are_dropped(self):
        t, _ = self.table()
        self.assertFalse(any(k[0] == "cuWindowsOnly" for k in t))

    def test_define_wins_over_the_rule_and_is_reported(self):
        t, notes = self.table()
        self.assertEqual(t[("cuRenamed", 5000, GEN.NORMAL)], "cuRenamed_v3")
        self.assertTrue(any(k == "exception" and "cuRenamed" in n for k, n in notes))

    def test_redirect_to_another_function_is_no_exception(self):
        t, notes = self.table()
        self.assertEqual(t[("cuRedirect", 5000, GEN.NORMAL)], "cuRedirect")
        self.assertFalse(any("cuRedirect" in n for _, n in notes))

    def test_undeclared_symbols_are_reported(self):
        self.typedefs = self.write("cudaTypedefs.h", TYPEDEFS +
                                   "typedef CUresult (CUDAAPI *PFN_cuInit_v9000)(int);\n")
        t, notes = self.table()
        self.assertEqual(t[("cuInit", 9000, GEN.NORMAL)], "cuInit_v2")
        self.assertTrue(any(k == "undeclared" and "cuInit_v2" in n for k, n in notes))

    def test_sources_follow_the_preprocessor(self):
        header = GEN.Header(self.cuda_h)
        plain = self.write("api_a.cc", "SIM_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p,\n")
        undef = self.write("api_b.cc", "#undef cuMemcpyHtoD\n"
                           "SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD(unsigned int d) {\n")
        internal = self.write("api_c.cc", "#define __CUDA_API_VERSION_INTERNAL 1\n"
                              "SIM_EXPORT CUresult CUDAAPI cuRenamed(int x) {\n")
        impl = GEN.scan_sources([plain, undef, internal], header)
        self.assertEqual(sorted(impl), ["cuMemAlloc_v2", "cuMemcpyHtoD", "cuRenamed"])

    def test_a_definition_wrapped_over_lines_is_found(self):
        # clang-format may break after CUDAAPI; missing it would also export
        # the generated stub under the same name (a duplicate symbol).
        header = GEN.Header(self.cuda_h)
        wrapped = self.write("api_w.cc", "SIM_EXPORT CUresult CUDAAPI\n"
                             "    cuGraphAddMemFreeNode(CUgraphNode* n,\n")
        self.assertEqual(sorted(GEN.scan_sources([wrapped], header)), ["cuGraphAddMemFreeNode"])


def main():
    global GEN
    spec = importlib.util.spec_from_file_location("gen_proc_table", sys.argv[1])
    GEN = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(GEN)
    unittest.main(argv=sys.argv[:1])


if __name__ == "__main__":
    main()
