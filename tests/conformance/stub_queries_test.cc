// Queries that used to be NOT_SUPPORTED stubs in the simulator (issue 16:
// "never a blanket NOT_SUPPORTED for a query"): graph and node queries.
// Portable suites assert only what cuda.h documents; Sim* suites hold the
// simulator's own answers.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "test_util.h"

// cuCtxGetSharedMemConfig is deprecated in CUDA 13 but still exported and answered.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace vgpu::conformance {
namespace {

void HostNop(void*) {}

// A small explicit graph:   k(kernel) -> c(memcpy) -> h(host)
//                           s(memset) --------------^
//                           e(empty, no edges)
class GraphQueryTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuMemAlloc(&a_, kBytes));
    ASSERT_CU_OK(cuMemAlloc(&b_, kBytes));
    ASSERT_CU_OK(cuGraphCreate(&g_, 0));
    value_ = 7;
    count_ = kBytes / 4;
    void* args[] = {&a_, &value_, &count_};
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = add_;
    kp.gridDimX = 2, kp.gridDimY = 1, kp.gridDimZ = 1;
    kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
    kp.kernelParams = args;
    ASSERT_CU_OK(cuGraphAddKernelNode(&k_, g_, nullptr, 0, &kp));
    CUDA_MEMCPY3D cp{};
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = a_;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = b_;
    cp.WidthInBytes = kBytes;
    cp.Height = 1;
    cp.Depth = 1;
    ASSERT_CU_OK(cuGraphAddMemcpyNode(&c_, g_, &k_, 1, &cp, ctx_));
    CUDA_MEMSET_NODE_PARAMS sp{};
    sp.dst = b_;
    sp.elementSize = 4;
    sp.width = 16;
    sp.height = 1;
    sp.pitch = 0;
    sp.value = 0x1234;
    ASSERT_CU_OK(cuGraphAddMemsetNode(&s_, g_, nullptr, 0, &sp, ctx_));
    CUDA_HOST_NODE_PARAMS hp{};
    hp.fn = HostNop;
    hp.userData = &value_;
    CUgraphNode hdeps[] = {c_, s_};
    ASSERT_CU_OK(cuGraphAddHostNode(&h_, g_, hdeps, 2, &hp));
    ASSERT_CU_OK(cuGraphAddEmptyNode(&e_, g_, nullptr, 0));
  }
  void TearDown() override {
    if (g_ != nullptr) cuGraphDestroy(g_);
    if (a_ != 0) cuMemFree(a_);
    if (b_ != 0) cuMemFree(b_);
    KernelTest::TearDown();
  }
  static constexpr size_t kBytes = 4096;
  CUdeviceptr a_ = 0, b_ = 0;
  uint32_t value_ = 0;
  uint64_t count_ = 0;
  CUgraph g_ = nullptr;
  CUgraphNode k_ = nullptr, c_ = nullptr, s_ = nullptr, h_ = nullptr, e_ = nullptr;
};

bool Contains(const std::vector<CUgraphNode>& v, CUgraphNode n) {
  for (CUgraphNode x : v) {
    if (x == n) return true;
  }
  return false;
}

TEST_F(GraphQueryTest, RootNodes) {
  size_t n = 0;
  ASSERT_CU_OK(cuGraphGetRootNodes(g_, nullptr, &n));
  ASSERT_EQ(n, 3u);
  std::vector<CUgraphNode> roots(5, reinterpret_cast<CUgraphNode>(1));
  n = roots.size();
  ASSERT_CU_OK(cuGraphGetRootNodes(g_, roots.data(), &n));
  EXPECT_EQ(n, 3u);
  EXPECT_TRUE(Contains(roots, k_));
  EXPECT_TRUE(Contains(roots, s_));
  EXPECT_TRUE(Contains(roots, e_));
  EXPECT_EQ(roots[3], nullptr);  // entries past the count are set to NULL
  EXPECT_EQ(roots[4], nullptr);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphGetRootNodes(g_, nullptr, nullptr));
}

TEST_F(GraphQueryTest, Edges) {
  size_t n = 0;
  ASSERT_CU_OK(cuGraphGetEdges(g_, nullptr, nullptr, nullptr, &n));
  ASSERT_EQ(n, 3u);
  std::vector<CUgraphNode> from(4), to(4);
  std::vector<CUgraphEdgeData> data(4);
  std::memset(data.data(), 0xff, data.size() * sizeof(CUgraphEdgeData));
  n = 4;
  ASSERT_CU_OK(cuGraphGetEdges(g_, from.data(), to.data(), data.data(), &n));
  ASSERT_EQ(n, 3u);
  int seen = 0;
  for (size_t i = 0; i < 3; ++i) {
    seen += (from[i] == k_ && to[i] == c_) + (from[i] == c_ && to[i] == h_) + (from[i] == s_ && to[i] == h_);
    EXPECT_EQ(data[i].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    EXPECT_EQ(data[i].from_port, 0);
    EXPECT_EQ(data[i].to_port, 0);
  }
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(from[3], nullptr);
  EXPECT_EQ(to[3], nullptr);
  // edgeData may alone be NULL.
  n = 4;
  ASSERT_CU_OK(cuGraphGetEdges(g_, from.data(), to.data(), nullptr, &n));
  EXPECT_EQ(n, 3u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphGetEdges(g_, nullptr, nullptr, nullptr, nullptr));
}

TEST_F(GraphQueryTest, DependenciesAndDependents) {
  struct Case {
    CUgraphNode* node;
    std::vector<CUgraphNode*> deps, dependents;
  } cases[] = {
      {&k_, {}, {&c_}},
      {&c_, {&k_}, {&h_}},
      {&s_, {}, {&h_}},
      {&h_, {&c_, &s_}, {}},
      {&e_, {}, {}},
  };
  for (const Case& c : cases) {
    size_t n = 99;
    ASSERT_CU_OK(cuGraphNodeGetDependencies(*c.node, nullptr, nullptr, &n));
    EXPECT_EQ(n, c.deps.size());
    std::vector<CUgraphNode> got(4);
    std::vector<CUgraphEdgeData> data(4);
    n = got.size();
    ASSERT_CU_OK(cuGraphNodeGetDependencies(*c.node, got.data(), data.data(), &n));
    EXPECT_EQ(n, c.deps.size());
    for (CUgraphNode* d : c.deps) EXPECT_TRUE(Contains(got, *d));
    EXPECT_EQ(got[c.deps.size()], nullptr);

    n = 99;
    ASSERT_CU_OK(cuGraphNodeGetDependentNodes(*c.node, nullptr, nullptr, &n));
    EXPECT_EQ(n, c.dependents.size());
    got.assign(4, nullptr);
    n = got.size();
    ASSERT_CU_OK(cuGraphNodeGetDependentNodes(*c.node, got.data(), nullptr, &n));
    EXPECT_EQ(n, c.dependents.size());
    for (CUgraphNode* d : c.dependents) EXPECT_TRUE(Contains(got, *d));
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeGetDependencies(k_, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeGetDependentNodes(k_, nullptr, nullptr, nullptr));
}

TEST_F(GraphQueryTest, KernelNodeParams) {
  CUDA_KERNEL_NODE_PARAMS p{};
  ASSERT_CU_OK(cuGraphKernelNodeGetParams(k_, &p));
  EXPECT_EQ(p.func, add_);
  EXPECT_EQ(p.gridDimX, 2u);
  EXPECT_EQ(p.gridDimY, 1u);
  EXPECT_EQ(p.gridDimZ, 1u);
  EXPECT_EQ(p.blockDimX, 128u);
  EXPECT_EQ(p.blockDimY, 1u);
  EXPECT_EQ(p.blockDimZ, 1u);
  EXPECT_EQ(p.sharedMemBytes, 0u);
  // The node owns a copy of the argument values.
  ASSERT_NE(p.kernelParams, nullptr);
  CUdeviceptr ptr = 0;
  uint32_t v = 0;
  uint64_t count = 0;
  std::memcpy(&ptr, p.kernelParams[0], sizeof(ptr));
  std::memcpy(&v, p.kernelParams[1], sizeof(v));
  std::memcpy(&count, p.kernelParams[2], sizeof(count));
  EXPECT_EQ(ptr, a_);
  EXPECT_EQ(v, 7u);
  EXPECT_EQ(count, kBytes / 4);
}

TEST_F(GraphQueryTest, MemcpyMemsetHostNodeParams) {
  CUDA_MEMCPY3D cp{};
  ASSERT_CU_OK(cuGraphMemcpyNodeGetParams(c_, &cp));
  EXPECT_EQ(cp.srcDevice, a_);
  EXPECT_EQ(cp.dstDevice, b_);
  EXPECT_EQ(cp.WidthInBytes, kBytes);
  EXPECT_EQ(cp.Height, 1u);
  EXPECT_EQ(cp.Depth, 1u);

  CUDA_MEMSET_NODE_PARAMS sp{};
  ASSERT_CU_OK(cuGraphMemsetNodeGetParams(s_, &sp));
  EXPECT_EQ(sp.dst, b_);
  EXPECT_EQ(sp.elementSize, 4u);
  EXPECT_EQ(sp.width, 16u);
  EXPECT_EQ(sp.height, 1u);
  EXPECT_EQ(sp.value, 0x1234u);

  CUDA_HOST_NODE_PARAMS hp{};
  ASSERT_CU_OK(cuGraphHostNodeGetParams(h_, &hp));
  EXPECT_EQ(hp.fn, &HostNop);
  EXPECT_EQ(hp.userData, &value_);
}

// Each typed query refuses a node of another type (CUDA_ERROR_INVALID_VALUE).
TEST_F(GraphQueryTest, TypedQueriesRefuseOtherNodeTypes) {
  CUDA_KERNEL_NODE_PARAMS kp;
  CUDA_MEMCPY3D cp;
  CUDA_MEMSET_NODE_PARAMS sp;
  CUDA_HOST_NODE_PARAMS hp;
  CUgraph child;
  CUevent ev;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
  for (CUgraphNode n : {k_, c_, s_, h_, e_}) {
    if (n != k_) {
      EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeGetParams(n, &kp));
    }
    if (n != c_) {
      EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemcpyNodeGetParams(n, &cp));
    }
    if (n != s_) {
      EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemsetNodeGetParams(n, &sp));
    }
    if (n != h_) {
      EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphHostNodeGetParams(n, &hp));
    }
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphChildGraphNodeGetGraph(n, &child));
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphEventRecordNodeGetEvent(n, &ev));
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphEventWaitNodeGetEvent(n, &ev));
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphBatchMemOpNodeGetParams(n, &bp));
  }
}

TEST_F(GraphQueryTest, ExecFlagsAndEnabled) {
  struct Case {
    unsigned long long flags;
  } cases[] = {{0}, {CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH}, {CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY}};
  for (const Case& c : cases) {
    CUgraphExec exec = nullptr;
    ASSERT_CU_OK(cuGraphInstantiateWithFlags(&exec, g_, c.flags));
    cuuint64_t flags = ~0ull;
    ASSERT_CU_OK(cuGraphExecGetFlags(exec, &flags));
    // Driver 580 reports AUTO_FREE_ON_LAUNCH back but not USE_NODE_PRIORITY
    // (H100, 2026-11-26).
    EXPECT_EQ(flags, c.flags & ~static_cast<unsigned long long>(
                                   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    unsigned enabled = 7;
    for (CUgraphNode n : {k_, c_, s_}) {
      ASSERT_CU_OK(cuGraphNodeGetEnabled(exec, n, &enabled));
      EXPECT_EQ(enabled, 1u);  // nodes start enabled
    }
    // Only kernel, memcpy and memset nodes have an enabled state.
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeGetEnabled(exec, h_, &enabled));
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecGetFlags(exec, nullptr));
    ASSERT_CU_OK(cuGraphExecDestroy(exec));
  }
}

// The simulator's own answers for captured copies and memsets: their
// resolved addresses, as CU_MEMORYTYPE_UNIFIED pointers.
class SimGraphQueryTest : public GraphQueryTest {};

TEST_F(SimGraphQueryTest, CapturedCopyAndMemsetAreUnifiedAddresses) {
  SKIP_UNLESS_SIM();
  CUstream st = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(b_, a_, 256, st));
  ASSERT_CU_OK(cuMemsetD16Async(a_ + 64, 0xabcd, 32, st));
  CUgraph graph = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(st, &graph));
  CUgraphNode nodes[2];
  size_t n = 2;
  ASSERT_CU_OK(cuGraphGetNodes(graph, nodes, &n));
  ASSERT_EQ(n, 2u);
  CUDA_MEMCPY3D cp{};
  ASSERT_CU_OK(cuGraphMemcpyNodeGetParams(nodes[0], &cp));
  EXPECT_EQ(cp.srcMemoryType, CU_MEMORYTYPE_UNIFIED);
  EXPECT_EQ(cp.srcDevice, a_);
  EXPECT_EQ(cp.dstDevice, b_);
  EXPECT_EQ(cp.WidthInBytes, 256u);
  CUDA_MEMSET_NODE_PARAMS sp{};
  ASSERT_CU_OK(cuGraphMemsetNodeGetParams(nodes[1], &sp));
  EXPECT_EQ(sp.dst, a_ + 64);
  EXPECT_EQ(sp.elementSize, 2u);
  EXPECT_EQ(sp.width, 32u);
  EXPECT_EQ(sp.value, 0xabcdu);
  // The captured chain: one edge from the copy to the memset.
  CUgraphNode from = nullptr, to = nullptr;
  n = 1;
  ASSERT_CU_OK(cuGraphGetEdges(graph, &from, &to, nullptr, &n));
  EXPECT_EQ(from, nodes[0]);
  EXPECT_EQ(to, nodes[1]);
  cuGraphDestroy(graph);
  cuStreamDestroy(st);
}

// The sim captures cuEventRecord as an event-record node (a real driver turns
// it into cross-stream dependencies) and a stream memory operation as a
// one-operation batch node; their queries answer from them.
TEST_F(SimGraphQueryTest, CapturedEventRecordAndMemOpNodes) {
  SKIP_UNLESS_SIM();
  CUstream st = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUevent ev = nullptr;
  ASSERT_CU_OK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(cuEventRecord(ev, st));
  ASSERT_CU_OK(cuStreamWriteValue32(st, a_, 5, 0));
  CUgraph graph = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(st, &graph));
  size_t n = 0;
  ASSERT_CU_OK(cuGraphGetNodes(graph, nullptr, &n));
  std::vector<CUgraphNode> nodes(n);
  ASSERT_CU_OK(cuGraphGetNodes(graph, nodes.data(), &n));
  int records = 0, memops = 0;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType t;
    ASSERT_CU_OK(cuGraphNodeGetType(node, &t));
    if (t == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
      CUevent got = nullptr;
      ASSERT_CU_OK(cuGraphEventRecordNodeGetEvent(node, &got));
      EXPECT_EQ(got, ev);
      ++records;
    } else if (t == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
      CUDA_BATCH_MEM_OP_NODE_PARAMS p{};
      ASSERT_CU_OK(cuGraphBatchMemOpNodeGetParams(node, &p));
      ASSERT_EQ(p.count, 1u);
      ASSERT_NE(p.paramArray, nullptr);
      EXPECT_EQ(p.paramArray[0].operation, CU_STREAM_MEM_OP_WRITE_VALUE_32);
      EXPECT_EQ(p.paramArray[0].writeValue.address, a_);
      EXPECT_EQ(p.paramArray[0].writeValue.value, 5u);
      ++memops;
    }
  }
  EXPECT_EQ(records, 1);
  EXPECT_EQ(memops, 1);
  cuGraphDestroy(graph);
  cuEventDestroy(ev);
  cuStreamDestroy(st);
}

// ---- Arrays ----

// The CUDA 3.x descriptors (32-bit fields), as the exported v1 entry points take them.
struct ArrayDescriptorV1 {
  unsigned int Width, Height;
  CUarray_format Format;
  unsigned int NumChannels;
};
struct Array3DDescriptorV1 {
  unsigned int Width, Height, Depth;
  CUarray_format Format;
  unsigned int NumChannels, Flags;
};

class ArrayQueryTest : public ContextTest {
 protected:
  static CUDA_ARRAY3D_DESCRIPTOR Desc(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned flags) {
    CUDA_ARRAY3D_DESCRIPTOR x{};
    x.Width = w, x.Height = h, x.Depth = d, x.Format = f, x.NumChannels = ch, x.Flags = flags;
    return x;
  }
  int Attr(CUdevice_attribute a) {
    int v = 0;
    EXPECT_CU_OK(cuDeviceGetAttribute(&v, a, dev_));
    return v;
  }
};

// Sim only: driver 580 answers the CUDA 3.x cuArrayGetDescriptor of an array
// made with cuArray3DCreate_v2 with CUDA_ERROR_INVALID_CONTEXT (H100,
// 2026-11-26; docs/sim.md lists it among the differences).
TEST_F(ArrayQueryTest, LegacyDescriptorsMatchTheV2Ones) {
  SKIP_UNLESS_SIM();
  using Get2D = CUresult (*)(ArrayDescriptorV1*, CUarray);
  using Get3D = CUresult (*)(Array3DDescriptorV1*, CUarray);
  auto get2d = reinterpret_cast<Get2D>(dlsym(RTLD_DEFAULT, "cuArrayGetDescriptor"));
  auto get3d = reinterpret_cast<Get3D>(dlsym(RTLD_DEFAULT, "cuArray3DGetDescriptor"));
  ASSERT_NE(get2d, nullptr);
  ASSERT_NE(get3d, nullptr);
  const CUDA_ARRAY3D_DESCRIPTOR cases[] = {
      Desc(64, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0),
      Desc(100, 30, 0, CU_AD_FORMAT_FLOAT, 4, 0),
      Desc(16, 8, 4, CU_AD_FORMAT_HALF, 2, 0),
      Desc(32, 32, 3, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_LAYERED),
  };
  for (const CUDA_ARRAY3D_DESCRIPTOR& d : cases) {
    CUarray a = nullptr;
    ASSERT_CU_OK(cuArray3DCreate(&a, &d));
    ArrayDescriptorV1 d1{};
    Array3DDescriptorV1 d3{};
    ASSERT_CU_OK(get2d(&d1, a));
    ASSERT_CU_OK(get3d(&d3, a));
    EXPECT_EQ(d1.Width, d.Width);
    EXPECT_EQ(d1.Height, d.Height);
    EXPECT_EQ(d1.Format, d.Format);
    EXPECT_EQ(d1.NumChannels, d.NumChannels);
    EXPECT_EQ(d3.Width, d.Width);
    EXPECT_EQ(d3.Height, d.Height);
    EXPECT_EQ(d3.Depth, d.Depth);
    EXPECT_EQ(d3.Format, d.Format);
    EXPECT_EQ(d3.NumChannels, d.NumChannels);
    EXPECT_EQ(d3.Flags & CUDA_ARRAY3D_LAYERED, d.Flags & CUDA_ARRAY3D_LAYERED);
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, get2d(nullptr, a));
    ASSERT_CU_OK(cuArrayDestroy(a));
  }
}

// Arrays without CUDA_ARRAY3D_DEFERRED_MAPPING / CUDA_ARRAY3D_SPARSE: the
// documented CUDA_ERROR_INVALID_VALUE.
TEST_F(ArrayQueryTest, PlainArraysHaveNoMemoryRequirementsOrSparseProperties) {
  CUDA_ARRAY3D_DESCRIPTOR d = Desc(64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0);
  CUarray a = nullptr;
  ASSERT_CU_OK(cuArray3DCreate(&a, &d));
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  CUDA_ARRAY_SPARSE_PROPERTIES sp{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuArrayGetMemoryRequirements(&req, a, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuArrayGetSparseProperties(&sp, a));
  ASSERT_CU_OK(cuArrayDestroy(a));
  CUmipmappedArray m = nullptr;
  ASSERT_CU_OK(cuMipmappedArrayCreate(&m, &d, 3));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetMemoryRequirements(&req, m, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetSparseProperties(&sp, m));
  ASSERT_CU_OK(cuMipmappedArrayDestroy(m));
}

TEST_F(ArrayQueryTest, DeferredMappingArraysReportTheirSize) {
  if (Attr(CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED) == 0) {
    GTEST_SKIP() << "no deferred-mapping arrays on this device";
  }
  CUDA_ARRAY3D_DESCRIPTOR d = Desc(256, 256, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING);
  CUarray a = nullptr;
  ASSERT_CU_OK(cuArray3DCreate(&a, &d));
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  ASSERT_CU_OK(cuArrayGetMemoryRequirements(&req, a, dev_));
  EXPECT_GE(req.size, 256u * 256 * 16);
  EXPECT_GT(req.alignment, 0u);
  EXPECT_EQ(req.alignment & (req.alignment - 1), 0u);
  ASSERT_CU_OK(cuArrayDestroy(a));
}

// The sim reports no deferred-mapping or sparse array support (it cannot map
// them: cuMemMapArrayAsync is not modelled) but creates such arrays, dense,
// and answers their queries: 2 MiB alignment, and 64 KiB tiles of the
// standard shapes.
class SimArrayQueryTest : public ArrayQueryTest {};

TEST_F(SimArrayQueryTest, DeferredAndSparseArrays) {
  SKIP_UNLESS_SIM();
  CUDA_ARRAY3D_DESCRIPTOR d = Desc(256, 256, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING);
  CUarray a = nullptr;
  ASSERT_CU_OK(cuArray3DCreate(&a, &d));
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  ASSERT_CU_OK(cuArrayGetMemoryRequirements(&req, a, dev_));
  EXPECT_EQ(req.size, 2u << 20);  // 1 MiB rounded up to the alignment
  EXPECT_EQ(req.alignment, 2u << 20);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuArrayGetMemoryRequirements(&req, a, 99));
  ASSERT_CU_OK(cuArrayDestroy(a));

  struct Case {
    size_t w, h, d;
    CUarray_format f;
    unsigned ch;
    unsigned tw, th, td;
  } cases[] = {
      {1024, 1024, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 256, 256, 1},
      {1024, 1024, 0, CU_AD_FORMAT_HALF, 1, 256, 128, 1},
      {1024, 1024, 0, CU_AD_FORMAT_FLOAT, 1, 128, 128, 1},
      {1024, 1024, 0, CU_AD_FORMAT_FLOAT, 2, 128, 64, 1},
      {1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4, 64, 64, 1},
      {128, 128, 128, CU_AD_FORMAT_UNSIGNED_INT8, 1, 64, 32, 32},
      {128, 128, 128, CU_AD_FORMAT_FLOAT, 1, 32, 32, 16},
      {128, 128, 128, CU_AD_FORMAT_FLOAT, 4, 16, 16, 16},
  };
  for (const Case& c : cases) {
    CUDA_ARRAY3D_DESCRIPTOR sd = Desc(c.w, c.h, c.d, c.f, c.ch, CUDA_ARRAY3D_SPARSE);
    ASSERT_CU_OK(cuArray3DCreate(&a, &sd));
    CUDA_ARRAY_SPARSE_PROPERTIES sp{};
    ASSERT_CU_OK(cuArrayGetSparseProperties(&sp, a));
    EXPECT_EQ(sp.tileExtent.width, c.tw);
    EXPECT_EQ(sp.tileExtent.height, c.th);
    EXPECT_EQ(sp.tileExtent.depth, c.td);
    EXPECT_EQ(sp.miptailFirstLevel, 0u);
    EXPECT_EQ(sp.miptailSize, 0u);
    ASSERT_CU_OK(cuArrayDestroy(a));
  }
  // A sparse mipmapped array: 512x512 floats, tile 128x128; levels 3 (64x64)
  // and below form the mip tail.
  CUDA_ARRAY3D_DESCRIPTOR md = Desc(512, 512, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SPARSE);
  CUmipmappedArray m = nullptr;
  ASSERT_CU_OK(cuMipmappedArrayCreate(&m, &md, 10));
  CUDA_ARRAY_SPARSE_PROPERTIES sp{};
  ASSERT_CU_OK(cuMipmappedArrayGetSparseProperties(&sp, m));
  EXPECT_EQ(sp.miptailFirstLevel, 3u);
  EXPECT_EQ(sp.miptailSize, 64u << 10);
  CUarray level = nullptr;
  ASSERT_CU_OK(cuMipmappedArrayGetLevel(&level, m, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuArrayGetSparseProperties(&sp, level));  // use the mipmap's
  ASSERT_CU_OK(cuMipmappedArrayDestroy(m));
}

// ---- Context and device queries ----

class DeviceQueryTest : public KernelTest {
 protected:
  int Attr(CUdevice_attribute a) {
    int v = 0;
    EXPECT_CU_OK(cuDeviceGetAttribute(&v, a, dev_));
    return v;
  }
  static CUlaunchConfig Config(unsigned block, unsigned grid, CUlaunchAttribute* attr, unsigned cluster) {
    CUlaunchConfig c{};
    c.gridDimX = grid, c.gridDimY = 1, c.gridDimZ = 1;
    c.blockDimX = block, c.blockDimY = 1, c.blockDimZ = 1;
    if (cluster > 0) {
      *attr = CUlaunchAttribute{};
      attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr->value.clusterDim.x = cluster;
      attr->value.clusterDim.y = 1;
      attr->value.clusterDim.z = 1;
      c.attrs = attr;
      c.numAttrs = 1;
    }
    return c;
  }
};

TEST_F(DeviceQueryTest, StreamGetCtxV2NamesTheContextAndNoGreenContext) {
  CUstream s = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (CUstream h : {s, static_cast<CUstream>(nullptr)}) {
    CUcontext c = nullptr;
    CUgreenCtx g = reinterpret_cast<CUgreenCtx>(1);
    ASSERT_CU_OK(cuStreamGetCtx_v2(h, &c, &g));
    EXPECT_EQ(c, ctx_);
    EXPECT_EQ(g, nullptr);
  }
  CUcontext c = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamGetCtx_v2(s, &c, nullptr));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(DeviceQueryTest, CtxGetDeviceV2) {
  CUdevice d = -1;
  ASSERT_CU_OK(cuCtxGetDevice_v2(&d, nullptr));  // NULL: the current context's device
  EXPECT_EQ(d, dev_);
  d = -1;
  ASSERT_CU_OK(cuCtxGetDevice_v2(&d, ctx_));
  EXPECT_EQ(d, dev_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetDevice_v2(nullptr, ctx_));
}

TEST_F(DeviceQueryTest, ExecAffinity) {
  int supported = -1;
  ASSERT_CU_OK(cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, dev_));
  EXPECT_TRUE(supported == 0 || supported == 1);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, 1000));
  CUexecAffinityParam p{};
  CUresult r = cuCtxGetExecAffinity(&p, CU_EXEC_AFFINITY_TYPE_SM_COUNT);
  if (r == CUDA_SUCCESS) {
    EXPECT_GT(p.param.smCount.val, 0u);
    EXPECT_LE(p.param.smCount.val, static_cast<unsigned>(Attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)));
  } else {
    EXPECT_EQ(r, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetExecAffinity(nullptr, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
}

TEST_F(DeviceQueryTest, SharedMemConfigAndTexture1DLinearWidth) {
  CUsharedconfig cfg = static_cast<CUsharedconfig>(-1);
  ASSERT_CU_OK(cuCtxGetSharedMemConfig(&cfg));
  EXPECT_TRUE(cfg == CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE || cfg == CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE ||
              cfg == CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE);
  const struct {
    CUarray_format f;
    unsigned ch;
  } cases[] = {{CU_AD_FORMAT_UNSIGNED_INT8, 1}, {CU_AD_FORMAT_FLOAT, 1}, {CU_AD_FORMAT_FLOAT, 4}, {CU_AD_FORMAT_HALF, 2}};
  for (const auto& c : cases) {
    size_t w = 0;
    ASSERT_CU_OK(cuDeviceGetTexture1DLinearMaxWidth(&w, c.f, c.ch, dev_));
    EXPECT_GT(w, 0u);
  }
  size_t w = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 1, 1000));
}

TEST_F(DeviceQueryTest, AtomicCapabilitiesValidateTheirArguments) {
  const CUatomicOperation ops[] = {CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_CAS, CU_ATOMIC_OPERATION_FLOAT_ADD};
  unsigned caps[3] = {};
  ASSERT_CU_OK(cuDeviceGetHostAtomicCapabilities(caps, ops, 3, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetHostAtomicCapabilities(caps, ops, 0, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetHostAtomicCapabilities(nullptr, ops, 3, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetHostAtomicCapabilities(caps, nullptr, 3, dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetHostAtomicCapabilities(caps, ops, 3, 1000));
  // The same device on both ends is not a link.
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetP2PAtomicCapabilities(caps, ops, 3, dev_, dev_));
}

TEST_F(DeviceQueryTest, GraphMemAttributes) {
  const CUgraphMem_attribute attrs[] = {CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
                                        CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH};
  for (CUgraphMem_attribute a : attrs) {
    cuuint64_t v = ~0ull;
    ASSERT_CU_OK(cuDeviceGetGraphMemAttribute(dev_, a, &v));
    EXPECT_NE(v, ~0ull);
  }
  // No graph of this process allocates memory: nothing is in use.
  cuuint64_t used = ~0ull;
  ASSERT_CU_OK(cuDeviceGetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 0u);
  cuuint64_t zero = 0;
  EXPECT_CU_OK(cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
  EXPECT_CU_OK(cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetGraphMemAttribute(1000, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &used));
}

TEST_F(DeviceQueryTest, LocationBasedPoolsAreTheDevicePools) {
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev_;
  CUmemoryPool by_loc = nullptr, by_dev = nullptr;
  ASSERT_CU_OK(cuMemGetDefaultMemPool(&by_loc, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  ASSERT_CU_OK(cuDeviceGetDefaultMemPool(&by_dev, dev_));
  EXPECT_EQ(by_loc, by_dev);
  ASSERT_CU_OK(cuMemGetMemPool(&by_loc, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  ASSERT_CU_OK(cuDeviceGetMemPool(&by_dev, dev_));
  EXPECT_EQ(by_loc, by_dev);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetDefaultMemPool(&by_loc, nullptr, CU_MEM_ALLOCATION_TYPE_PINNED));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetMemPool(&by_loc, &loc, CU_MEM_ALLOCATION_TYPE_INVALID));
  loc.type = CU_MEM_LOCATION_TYPE_INVALID;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetDefaultMemPool(&by_loc, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));

  // A device's pool is read-write from the device itself.
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  ASSERT_CU_OK(cuMemPoolGetAccess(&flags, by_dev, &loc));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

TEST_F(DeviceQueryTest, ClusterOccupancy) {
  if (Attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) == 0) GTEST_SKIP() << "no cluster launch";
  CUlaunchAttribute attr;
  CUlaunchConfig c = Config(128, 16, &attr, 0);
  int size = 0;
  ASSERT_CU_OK(cuOccupancyMaxPotentialClusterSize(&size, add_, &c));
  EXPECT_GE(size, 1);
  EXPECT_LE(size, 8);  // portable unless the kernel allows more
  for (unsigned cluster : {1u, 2u, 4u, 8u}) {
    c = Config(128, 16, &attr, cluster);
    int clusters = 0;
    ASSERT_CU_OK(cuOccupancyMaxActiveClusters(&clusters, add_, &c));
    EXPECT_GT(clusters, 0) << cluster;
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxActiveClusters(nullptr, add_, &c));
}

// The simulator's own answers.
class SimDeviceQueryTest : public DeviceQueryTest {};

TEST_F(SimDeviceQueryTest, ModelledValues) {
  SKIP_UNLESS_SIM();
  int supported = -1;
  ASSERT_CU_OK(cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, dev_));
  EXPECT_EQ(supported, 0);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_MAX, dev_));
  CUexecAffinityParam p{};
  ASSERT_CU_OK(cuCtxGetExecAffinity(&p, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
  EXPECT_EQ(p.param.smCount.val, static_cast<unsigned>(Attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)));
  CUsharedconfig cfg;
  ASSERT_CU_OK(cuCtxGetSharedMemConfig(&cfg));
  EXPECT_EQ(cfg, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE);
  size_t w = 0;
  ASSERT_CU_OK(cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 4, dev_));
  EXPECT_EQ(w, size_t{1} << 28);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 3, dev_));

  // Host atomics: none natively over PCIe, as HOST_NATIVE_ATOMIC_SUPPORTED says.
  const CUatomicOperation ops[] = {CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_CAS,
                                   CU_ATOMIC_OPERATION_FLOAT_ADD};
  unsigned caps[3] = {9, 9, 9};
  ASSERT_CU_OK(cuDeviceGetHostAtomicCapabilities(caps, ops, 3, dev_));
  for (unsigned c : caps) EXPECT_EQ(c, 0u);
  EXPECT_EQ(Attr(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED), 0);
  const CUatomicOperation bad = CU_ATOMIC_OPERATION_MAX;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetHostAtomicCapabilities(caps, &bad, 1, dev_));
  int count = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&count));
  if (count > 1) {
    // P2P atomics follow the link (VGPU_SIM_P2P): all or nothing.
    int native = -1;
    ASSERT_CU_OK(cuDeviceGetP2PAttribute(&native, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 0, 1));
    ASSERT_CU_OK(cuDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 1));
    for (unsigned c : caps) EXPECT_EQ(c != 0, native != 0);
  }

  // Graph memory: none; high watermarks reset only to 0.
  cuuint64_t one = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &one));

  // Host and managed pools are not modelled.
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemoryPool pool = nullptr;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemGetDefaultMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  loc.type = CU_MEM_LOCATION_TYPE_NONE;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemGetMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_MANAGED));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = 1000;
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuMemGetDefaultMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  if (count > 1) {
    // Another device has no access to a pool (cuMemPoolSetAccess is not modelled).
    ASSERT_CU_OK(cuDeviceGetDefaultMemPool(&pool, 0));
    loc.id = 1;
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_CU_OK(cuMemPoolGetAccess(&flags, pool, &loc));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  }
}

// Clusters fit in a GPC of 16 SMs (132 SMs: 8 GPCs, 4 with 17).
TEST_F(SimDeviceQueryTest, ClusterOccupancyModel) {
  SKIP_UNLESS_SIM();
  CUlaunchAttribute attr;
  CUlaunchConfig c = Config(128, 16, &attr, 0);
  int size = 0;
  ASSERT_CU_OK(cuOccupancyMaxPotentialClusterSize(&size, add_, &c));
  EXPECT_EQ(size, 8);
  int blocks = 0;
  ASSERT_CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_, 128, 0));
  ASSERT_GT(blocks, 0);
  const int sms = Attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  for (int cluster : {1, 2, 4, 8}) {
    c = Config(128, 16, &attr, static_cast<unsigned>(cluster));
    int clusters = 0;
    ASSERT_CU_OK(cuOccupancyMaxActiveClusters(&clusters, add_, &c));
    const int gpcs = std::max(1, sms / 16);
    int want = 0;
    for (int g = 0; g < gpcs; ++g) want += (sms / gpcs + (g < sms % gpcs ? 1 : 0)) * blocks / cluster;
    EXPECT_EQ(clusters, want) << cluster;
  }
  // No cluster size (neither in the config nor required by the kernel), or a
  // non-portable one the kernel does not allow.
  c = Config(128, 16, &attr, 0);
  int clusters = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxActiveClusters(&clusters, add_, &c));
  c = Config(128, 16, &attr, 16);
  EXPECT_CU(CUDA_ERROR_INVALID_CLUSTER_SIZE, cuOccupancyMaxActiveClusters(&clusters, add_, &c));
}

}  // namespace
}  // namespace vgpu::conformance
