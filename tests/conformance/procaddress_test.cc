// cuGetProcAddress / cuGetProcAddress_v2 versus the exported symbols, and the
// way cudart finds the driver (dlopen + one dlsym + cuGetProcAddress_v2).
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstring>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class ProcAddressTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(lib_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (lib_ != nullptr) dlclose(lib_);
    ContextTest::TearDown();
  }
  void* Sym(const char* name) { return dlsym(lib_, name); }
  void* Proc(const char* name, int version, cuuint64_t flags,
             CUdriverProcAddressQueryResult* status = nullptr, CUresult* result = nullptr) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st;
    CUresult r = cuGetProcAddress(name, &p, version, flags, &st);
    if (status != nullptr) *status = st;
    if (result != nullptr) *result = r;
    EXPECT_CU_OK(r) << name << "@" << version;
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS) << name << "@" << version;
    return p;
  }
  void* lib_ = nullptr;
};

TEST_F(ProcAddressTest, VersionSelectsTheAbiVariant) {
  void* v2 = Sym("cuMemAlloc_v2");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(Proc("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_DEFAULT), v2);
  EXPECT_EQ(Proc("cuMemAlloc", CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT), v2);
  void* v1 = Proc("cuMemAlloc", 2000, CU_GET_PROC_ADDRESS_DEFAULT);
  EXPECT_NE(v1, nullptr);
  EXPECT_NE(v1, v2) << "cuMemAlloc@2000 must be the 32-bit ABI entry";
  EXPECT_EQ(v1, Sym("cuMemAlloc"));
  // Calls through the table reach the same implementation.
  auto alloc = reinterpret_cast<PFN_cuMemAlloc_v3020>(v2);
  CUdeviceptr p = 0;
  ASSERT_CU_OK(alloc(&p, 4096));
  ASSERT_CU_OK(cuMemFree(p));

  EXPECT_EQ(Proc("cuCtxCreate", CUDA_VERSION, 0), Sym("cuCtxCreate_v4"));
  EXPECT_EQ(Proc("cuCtxCreate", 11040, 0), Sym("cuCtxCreate_v3"));
  EXPECT_EQ(Proc("cuStreamDestroy", 4000, 0), Sym("cuStreamDestroy_v2"));
  EXPECT_EQ(Proc("cuDevicePrimaryCtxRelease", 11000, 0), Sym("cuDevicePrimaryCtxRelease_v2"));
  EXPECT_EQ(Proc("cuDeviceTotalMem", 3020, 0), Sym("cuDeviceTotalMem_v2"));
  EXPECT_EQ(Proc("cuInit", 2000, 0), Sym("cuInit"));
}

TEST_F(ProcAddressTest, CtxSynchronizeV2AtCuda13) {
  void* legacy = Proc("cuCtxSynchronize", 12000, 0);
  void* v13 = Proc("cuCtxSynchronize", 13000, 0);
  EXPECT_EQ(legacy, Sym("cuCtxSynchronize"));
  ASSERT_NE(v13, nullptr);
  EXPECT_NE(v13, legacy);
  EXPECT_EQ(v13, Sym("cuCtxSynchronize_v2"));
  EXPECT_CU_OK(reinterpret_cast<PFN_cuCtxSynchronize_v13000>(v13)(ctx_));
}

TEST_F(ProcAddressTest, PerThreadDefaultStreamVariants) {
  EXPECT_EQ(Proc("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Sym("cuMemcpyHtoD_v2_ptds"));
  EXPECT_EQ(Proc("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM), Sym("cuMemcpyHtoD_v2"));
  // Older than the per-thread entries (7.0): not sufficient on driver 580,
  // though the documentation suggests the legacy entry.
  for (const char* name : {"cuMemcpyHtoD", "cuLaunchKernel"}) {
    void* p = &p;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    EXPECT_CU_OK(cuGetProcAddress(name, &p, 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                                  &st));
    EXPECT_EQ(p, nullptr) << name;
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) << name;
  }
  EXPECT_EQ(Proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Sym("cuLaunchKernel_ptsz"));
  EXPECT_EQ(Proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM), Sym("cuLaunchKernel"));
  EXPECT_EQ(Proc("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Sym("cuMemAllocAsync_ptsz"));
  EXPECT_EQ(Proc("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Sym("cuStreamSynchronize_ptsz"));
  // Entries without a per-thread variant fall back to the legacy one.
  EXPECT_EQ(Proc("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Sym("cuMemAlloc_v2"));
  EXPECT_NE(Sym("cuMemcpyHtoD_v2_ptds"), nullptr);
  EXPECT_NE(Sym("cuMemcpyHtoD_v2_ptds"), Sym("cuMemcpyHtoD_v2"));
  // The per-thread entry works.
  auto htod = reinterpret_cast<PFN_cuMemcpyHtoD_v3020>(Sym("cuMemcpyHtoD_v2_ptds"));
  ASSERT_NE(htod, nullptr);
  CUdeviceptr p;
  ASSERT_CU_OK(cuMemAlloc(&p, 4));
  uint32_t v = 0x1234, back = 0;
  ASSERT_CU_OK(htod(p, &v, 4));
  ASSERT_CU_OK(cuMemcpyDtoH(&back, p, 4));
  EXPECT_EQ(back, v);
  ASSERT_CU_OK(cuMemFree(p));
}

// The graph entry points whose ABI changed: each version resolves to its own
// symbol, never to a NOT_SUPPORTED stub (issue 16: "cuGraphInstantiate"
// at 11000-12xxx used to be one), and the legacy forms work when called.
TEST_F(ProcAddressTest, LegacyGraphAndCaptureEntriesResolveToTheirAbi) {
  EXPECT_EQ(Proc("cuGraphInstantiate", 10000, 0), Sym("cuGraphInstantiate"));
  for (int version : {11000, 11040, 12000, 12080}) {
    EXPECT_EQ(Proc("cuGraphInstantiate", version, 0), Sym("cuGraphInstantiate_v2")) << version;
  }
  EXPECT_EQ(Proc("cuStreamBeginCapture", 10000, 0), Sym("cuStreamBeginCapture"));
  EXPECT_EQ(Proc("cuStreamBeginCapture", 10010, 0), Sym("cuStreamBeginCapture_v2"));
  EXPECT_EQ(Proc("cuStreamGetCaptureInfo", 10010, 0), Sym("cuStreamGetCaptureInfo"));
  EXPECT_EQ(Proc("cuStreamGetCaptureInfo", 11030, 0), Sym("cuStreamGetCaptureInfo_v2"));

  // The legacy typedefs are internal to cudaTypedefs.h.
  using BeginCapture10000 = CUresult(CUDAAPI*)(CUstream);
  using Instantiate11000 = CUresult(CUDAAPI*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
  auto begin = reinterpret_cast<BeginCapture10000>(Proc("cuStreamBeginCapture", 10000, 0));
  auto info = reinterpret_cast<PFN_cuStreamGetCaptureInfo_v10010>(Proc("cuStreamGetCaptureInfo", 10010, 0));
  auto instantiate = reinterpret_cast<Instantiate11000>(Proc("cuGraphInstantiate", 11000, 0));
  ASSERT_NE(begin, nullptr);
  ASSERT_NE(info, nullptr);
  ASSERT_NE(instantiate, nullptr);
  CUstream s = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(begin(s));
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  ASSERT_CU_OK(info(s, &st, &id));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  CUgraph g = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(s, &g));
  CUgraphExec e = nullptr;
  CUgraphNode err = reinterpret_cast<CUgraphNode>(1);
  char log[64] = "x";
  ASSERT_CU_OK(instantiate(&e, g, &err, log, sizeof log));
  EXPECT_NE(e, nullptr);
  ASSERT_CU_OK(cuGraphLaunch(e, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuGraphDestroy(g));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(ProcAddressTest, UnknownSymbolAndInsufficientVersion) {
  void* p = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  // CUDA_SUCCESS with a NULL pointer and the status (driver 580, as the header says).
  EXPECT_CU_OK(cuGetProcAddress("cuNoSuchFunction", &p, CUDA_VERSION, 0, &st));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  p = reinterpret_cast<void*>(1);
  st = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_CU_OK(cuGetProcAddress("cuMemAllocAsync", &p, 11000, 0, &st));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  // A version above the driver's is invalid.
  int driver = 0;
  ASSERT_CU_OK(cuDriverGetVersion(&driver));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuMemAlloc", &p, driver + 1000, 0, &st));
  // A NULL pfn crashes driver 580; the sim refuses it.
  if (IsSim()) {
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuMemAlloc", nullptr, 3020, 0, &st));
  }
}

TEST_F(ProcAddressTest, OldFourArgumentEntry) {
  auto old = reinterpret_cast<PFN_cuGetProcAddress_v11030>(Sym("cuGetProcAddress"));
  ASSERT_NE(old, nullptr);
  void* p = nullptr;
  ASSERT_CU_OK(old("cuMemAlloc", &p, 3020, 0));
  EXPECT_EQ(p, Sym("cuMemAlloc_v2"));
  void* self = nullptr;
  EXPECT_EQ(Proc("cuGetProcAddress", 12000, 0), Sym("cuGetProcAddress_v2"));
  EXPECT_EQ(Proc("cuGetProcAddress", 11030, 0), Sym("cuGetProcAddress"));
  (void)self;
}

TEST_F(ProcAddressTest, SimExportTableIsNotSupported) {
  SKIP_UNLESS_SIM();
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid id{};
  memset(id.bytes, 0x42, sizeof id.bytes);
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&table, &id));
  EXPECT_EQ(Proc("cuGetExportTable", 3000, 0), Sym("cuGetExportTable"));
}

// What cudart does: dlopen the driver, dlsym exactly one symbol, resolve the
// rest through it.
TEST_F(ProcAddressTest, CudartPattern) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
  ASSERT_NE(gpa, nullptr);
  auto get = [&](const char* name, int version, void** out) {
    CUdriverProcAddressQueryResult st;
    CUresult r = gpa(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    EXPECT_CU_OK(r) << name;
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS) << name;
    EXPECT_NE(*out, nullptr) << name;
  };
  PFN_cuInit_v2000 init;
  PFN_cuDriverGetVersion_v2020 version;
  PFN_cuDeviceGet_v2000 device_get;
  PFN_cuDevicePrimaryCtxRetain_v7000 retain;
  PFN_cuDevicePrimaryCtxRelease_v11000 release;
  PFN_cuCtxSetCurrent_v4000 set_current;
  PFN_cuMemAlloc_v3020 alloc;
  PFN_cuMemFree_v3020 free_fn;
  PFN_cuMemcpyHtoD_v3020 htod;
  PFN_cuMemcpyDtoH_v3020 dtoh;
  PFN_cuMemsetD32_v3020 memset32;
  get("cuInit", 2000, reinterpret_cast<void**>(&init));
  get("cuDriverGetVersion", 2020, reinterpret_cast<void**>(&version));
  get("cuDeviceGet", 2000, reinterpret_cast<void**>(&device_get));
  get("cuDevicePrimaryCtxRetain", 7000, reinterpret_cast<void**>(&retain));
  get("cuDevicePrimaryCtxRelease", 11000, reinterpret_cast<void**>(&release));
  get("cuCtxSetCurrent", 4000, reinterpret_cast<void**>(&set_current));
  get("cuMemAlloc", 3020, reinterpret_cast<void**>(&alloc));
  get("cuMemFree", 3020, reinterpret_cast<void**>(&free_fn));
  get("cuMemcpyHtoD", 3020, reinterpret_cast<void**>(&htod));
  get("cuMemcpyDtoH", 3020, reinterpret_cast<void**>(&dtoh));
  get("cuMemsetD32", 3020, reinterpret_cast<void**>(&memset32));
  if (HasFailure()) {
    dlclose(h);
    return;
  }
  int v = 0;
  ASSERT_CU_OK(init(0));
  ASSERT_CU_OK(version(&v));
  EXPECT_GE(v, 13000);
  CUdevice d;
  ASSERT_CU_OK(device_get(&d, 0));
  CUcontext c;
  ASSERT_CU_OK(retain(&c, d));
  ASSERT_CU_OK(set_current(c));
  CUdeviceptr p;
  ASSERT_CU_OK(alloc(&p, 64 * 4));
  std::vector<uint32_t> in(64), out(64, 0);
  for (uint32_t i = 0; i < 64; ++i) in[i] = i * i;
  ASSERT_CU_OK(htod(p, in.data(), 64 * 4));
  ASSERT_CU_OK(memset32(p, 5, 1));
  ASSERT_CU_OK(dtoh(out.data(), p, 64 * 4));
  in[0] = 5;
  EXPECT_EQ(in, out);
  ASSERT_CU_OK(free_fn(p));
  ASSERT_CU_OK(release(d));
  dlclose(h);
}

}  // namespace
}  // namespace vgpu::conformance
