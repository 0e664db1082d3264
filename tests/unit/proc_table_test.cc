// The cuGetProcAddress table derived from the toolkit headers
// (driver/tools/gen_proc_table.py), its lookup rules (driver/proc_table.h), and the
// entry points of the built simulated libcuda (sim/api/api_procaddress.cc).
#include "driver/proc_table.h"

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <tuple>

namespace {
int implemented_mark;  // fn of entries the sim implements, in this test's copy
}  // namespace
#define VGPU_PROC_FN(sym) static_cast<void*>(&implemented_mark)
#include "proc_table.inc"

namespace vgpu::driver {
namespace {

constexpr size_t kSize = sizeof(kProcTable) / sizeof(kProcTable[0]);

// The symbol the table yields, or "<not found>" / "<version>" for the statuses.
std::string Resolve(const char* name, int version, bool per_thread = false) {
  ProcLookup r = LookupProc(kProcTable, kSize, name, version, per_thread);
  if (r.status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) return "<not found>";
  if (r.status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) return "<version>";
  EXPECT_NE(r.entry, nullptr);
  return r.entry != nullptr ? r.entry->symbol : "<null>";
}

TEST(ProcTable, SortedUniqueAndWellFormed) {
  ASSERT_GT(kSize, 400u);  // cudart alone resolves ~440 names
  std::set<std::string> symbols;
  for (size_t i = 0; i < kSize; ++i) {
    const ProcEntry& e = kProcTable[i];
    EXPECT_EQ(std::strncmp(e.name, "cu", 2), 0) << e.name;
    EXPECT_LE(e.variant, kProcPtsz) << e.name;
    EXPECT_EQ(std::strncmp(e.symbol, e.name, std::strlen(e.name)), 0) << e.symbol;
    EXPECT_TRUE(symbols.insert(e.symbol).second) << "duplicate symbol " << e.symbol;
    if (i == 0) continue;
    const ProcEntry& p = kProcTable[i - 1];
    auto key = [](const ProcEntry& x) {
      return std::make_tuple(std::string(x.name), x.version, x.variant);
    };
    EXPECT_LT(key(p), key(e)) << p.symbol << " / " << e.symbol;
  }
}

TEST(ProcTable, NewestVersionAtOrBelowTheAskedOne) {
  EXPECT_EQ(Resolve("cuMemAlloc", 2000), "cuMemAlloc");
  EXPECT_EQ(Resolve("cuMemAlloc", 3010), "cuMemAlloc");
  EXPECT_EQ(Resolve("cuMemAlloc", 3020), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuMemAlloc", 13000), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuCtxCreate", 2000), "cuCtxCreate");
  EXPECT_EQ(Resolve("cuCtxCreate", 3020), "cuCtxCreate_v2");
  EXPECT_EQ(Resolve("cuCtxCreate", 11030), "cuCtxCreate_v2");
  EXPECT_EQ(Resolve("cuCtxCreate", 11040), "cuCtxCreate_v3");
  EXPECT_EQ(Resolve("cuCtxCreate", 12050), "cuCtxCreate_v4");
  EXPECT_EQ(Resolve("cuCtxCreate", 13000), "cuCtxCreate_v4");
  EXPECT_EQ(Resolve("cuGetProcAddress", 11030), "cuGetProcAddress");
  EXPECT_EQ(Resolve("cuGetProcAddress", 12000), "cuGetProcAddress_v2");
  EXPECT_EQ(Resolve("cuDeviceGetUuid", 11040), "cuDeviceGetUuid_v2");
  EXPECT_EQ(Resolve("cuInit", 2000), "cuInit");
}

TEST(ProcTable, PerThreadVariants) {
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 10000), "cuStreamBeginCapture");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 10010), "cuStreamBeginCapture_v2");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 10000, true), "cuStreamBeginCapture_ptsz");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 10010, true), "cuStreamBeginCapture_v2_ptsz");
  EXPECT_EQ(Resolve("cuLaunchKernel", 12000), "cuLaunchKernel");
  EXPECT_EQ(Resolve("cuLaunchKernel", 12000, true), "cuLaunchKernel_ptsz");
  // Older than every per-thread variant: not sufficient (driver 580), though
  // the documentation suggests the legacy entry.
  EXPECT_EQ(Resolve("cuLaunchKernel", 4000, true), "<version>");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 12000, true), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 3020, true), "<version>");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 12000), "cuMemcpyHtoD_v2");
  EXPECT_EQ(Resolve("cuMemcpy", 12000, true), "cuMemcpy_ptds");
  EXPECT_EQ(Resolve("cuStreamGetCtx", 12000, true), "cuStreamGetCtx_ptsz");
  EXPECT_EQ(Resolve("cuStreamGetCtx", 12050, true), "cuStreamGetCtx_v2_ptsz");
  // Functions without a per-thread variant answer the normal one.
  EXPECT_EQ(Resolve("cuMemAlloc", 12000, true), "cuMemAlloc_v2");
}

TEST(ProcTable, NotFoundAndVersionNotSufficient) {
  EXPECT_EQ(Resolve("cuNoSuchFunction", 13000), "<not found>");
  EXPECT_EQ(Resolve("", 13000), "<not found>");
  EXPECT_EQ(Resolve("cuMemAlloc_v2", 13000), "<not found>");  // base names only
  EXPECT_EQ(Resolve("cuMemAlloc", 1000), "<version>");
  EXPECT_EQ(Resolve("cuMemAlloc", -1), "<version>");
  EXPECT_EQ(Resolve("cuCtxCreate_v4", 13000), "<not found>");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 9020, true), "<version>");
}

TEST(ProcTable, EveryEntryIsReachableAtItsOwnVersion) {
  for (const ProcEntry& e : kProcTable) {
    EXPECT_EQ(Resolve(e.name, e.version, e.variant != kProcNormal), e.symbol);
  }
}

TEST(ProcTable, HasWhatCudartNeedsFirst) {
  for (const char* name :
       {"cuInit", "cuDriverGetVersion", "cuGetErrorString", "cuGetErrorName", "cuDeviceGet",
        "cuDeviceGetCount", "cuGetExportTable", "cuGraphicsGLRegisterBuffer", "cuProfilerStart"}) {
    EXPECT_NE(Resolve(name, 13000), "<not found>") << name;
  }
  EXPECT_EQ(Resolve("cuWGLGetDevice", 13000), "<not found>");  // Windows only
}

// --- Through the built simulated libcuda --------------------------------

using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetExportTable = CUresult (*)(const void**, const CUuuid*);

class SimProcAddress : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifdef VGPU_SIM_CUDA_PATH
    lib_ = dlopen(VGPU_SIM_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) error_ = dlerror();
#else
    error_ = "VGPU_SIM_CUDA_PATH not defined";
#endif
  }
  void SetUp() override {
    if (lib_ == nullptr) GTEST_SKIP() << "simulated libcuda not loadable: " << error_;
    v2_ = reinterpret_cast<GetProcV2>(dlsym(lib_, "cuGetProcAddress_v2"));
    v1_ = reinterpret_cast<GetProcV1>(dlsym(lib_, "cuGetProcAddress"));
    ASSERT_NE(v2_, nullptr);
    ASSERT_NE(v1_, nullptr);
  }
  // What cuGetProcAddress_v2 must return for an entry of `symbol`: the
  // library's own export when it has one, else the NOT_SUPPORTED stub.
  void ExpectResolvesTo(void* fn, const char* symbol) {
    void* exported = dlsym(lib_, symbol);
    if (exported != nullptr) {
      EXPECT_EQ(fn, exported) << symbol;
    } else {
      ASSERT_NE(fn, nullptr) << symbol;
      EXPECT_EQ(reinterpret_cast<CUresult (*)()>(fn)(), CUDA_ERROR_NOT_SUPPORTED) << symbol;
    }
  }
  static inline void* lib_ = nullptr;
  static inline std::string error_;
  GetProcV2 v2_ = nullptr;
  GetProcV1 v1_ = nullptr;
};

TEST_F(SimProcAddress, ResolvesVersionedSymbolsBeforeCuInit) {
  void* fn = nullptr;
  auto status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  ASSERT_EQ(v2_("cuInit", &fn, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, dlsym(lib_, "cuInit"));
  ASSERT_EQ(v2_("cuMemAlloc", &fn, 3020, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  ExpectResolvesTo(fn, "cuMemAlloc_v2");
  ASSERT_EQ(
      v2_("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
      CUDA_SUCCESS);
  ExpectResolvesTo(fn, "cuLaunchKernel_ptsz");
  ASSERT_EQ(v2_("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status),
            CUDA_SUCCESS);
  ExpectResolvesTo(fn, "cuLaunchKernel");
  ASSERT_EQ(v2_("cuGetProcAddress", &fn, 12000, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(v2_));
  ASSERT_EQ(v1_("cuGetProcAddress", &fn, 11030, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(v1_));
}

TEST_F(SimProcAddress, EveryTableEntryThroughTheLibrary) {
  for (const ProcEntry& e : kProcTable) {
    void* fn = nullptr;
    auto status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cuuint64_t flags = e.variant == kProcNormal ? CU_GET_PROC_ADDRESS_LEGACY_STREAM
                                                : CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    ASSERT_EQ(v2_(e.name, &fn, e.version, flags, &status), CUDA_SUCCESS) << e.symbol;
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
    ExpectResolvesTo(fn, e.symbol);
  }
}

TEST_F(SimProcAddress, NotFoundAndVersionNotSufficient) {
  void* fn = &fn;
  auto status = CU_GET_PROC_ADDRESS_SUCCESS;
  // CUDA_SUCCESS with a NULL pointer, as driver 580 answers.
  EXPECT_EQ(v2_("cuNoSuchFunction", &fn, 12000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  fn = &fn;
  EXPECT_EQ(v2_("cuMemAlloc", &fn, 1000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(fn, nullptr);
  fn = &fn;
  EXPECT_EQ(v1_("cuNoSuchFunction", &fn, 12000, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(v2_("cuNoSuchFunction", &fn, 12000, 0, nullptr), CUDA_SUCCESS);
}

TEST_F(SimProcAddress, InvalidArguments) {
  void* fn = nullptr;
  auto status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(v2_(nullptr, &fn, 12000, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v2_("cuInit", nullptr, 12000, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v2_("cuInit", &fn, 12000, 4, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v2_("cuInit", &fn, 12000, 3, &status), CUDA_ERROR_INVALID_VALUE);
  // Newer than the driver: documented as invalid.
  EXPECT_EQ(v2_("cuInit", &fn, CUDA_VERSION + 10, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v1_(nullptr, &fn, 12000, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v1_("cuInit", &fn, 12000, 8), CUDA_ERROR_INVALID_VALUE);
}

// A real driver exports every entry point; clients that bind them all at
// start (ctypes) must find the ones the sim lacks, and get NOT_SUPPORTED.
TEST_F(SimProcAddress, UnimplementedEntryPointsAreExportedStubs) {
  // The generator marks the entry points no sim/api/api_*.cc defines (fn is
  // nullptr in this copy); few remain, so each is checked rather than one
  // named here that a later change implements.
  using Stub = CUresult (*)();
  int stubs = 0;
  for (const ProcEntry& e : kProcTable) {
    if (e.fn != nullptr) continue;
    ++stubs;
    // A stub takes no arguments and touches none: it answers NOT_SUPPORTED.
    auto get = reinterpret_cast<Stub>(dlsym(lib_, e.symbol));
    ASSERT_NE(get, nullptr) << e.symbol << ": " << dlerror();
    EXPECT_EQ(get(), CUDA_ERROR_NOT_SUPPORTED) << e.symbol;
    // cuGetProcAddress hands out the same function as dlsym, as a driver does.
    void* fn = nullptr;
    unsigned long long flags = e.variant == kProcNormal
                                   ? CU_GET_PROC_ADDRESS_DEFAULT
                                   : CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    ASSERT_EQ(v2_(e.name, &fn, e.version, flags, nullptr), CUDA_SUCCESS) << e.name;
    EXPECT_EQ(fn, reinterpret_cast<void*>(get)) << e.name;
  }
  // An implemented entry point is not the stub: cuImportExternalMemory
  // validates its arguments.
  using ImportExternalMemory =
      CUresult (*)(CUexternalMemory*, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC*);
  auto import = reinterpret_cast<ImportExternalMemory>(dlsym(lib_, "cuImportExternalMemory"));
  ASSERT_NE(import, nullptr) << dlerror();
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib_, "cuInit"));
  ASSERT_NE(init, nullptr) << dlerror();
  ASSERT_EQ(init(0), CUDA_SUCCESS);
  EXPECT_EQ(import(nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  for (const ProcEntry& e : kProcTable) EXPECT_NE(dlsym(lib_, e.symbol), nullptr) << e.symbol;
  if (stubs == 0) GTEST_SKIP() << "every entry point is implemented: no stub to check";
}

TEST_F(SimProcAddress, ExportTableIsNotEmulated) {
  auto get = reinterpret_cast<GetExportTable>(dlsym(lib_, "cuGetExportTable"));
  ASSERT_NE(get, nullptr);
  const void* table = &table;
  CUuuid id{};
  EXPECT_EQ(get(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(table, nullptr);
}

}  // namespace
}  // namespace vgpu::driver
