// Memory allocation and free nodes: cuGraphAddMemAllocNode,
// cuGraphAddMemFreeNode, the same nodes through cuGraphAddNode and from
// cuMemAllocAsync/cuMemFreeAsync captured into a graph, the launch rules of
// graph allocations, the device's graph memory attributes and the
// restrictions cuda.h puts on graphs holding memory nodes (issue 16: these
// were the simulator's last NOT_SUPPORTED stubs). Suites not named Sim* assert
// only what cuda.h documents and also run on a real driver (label gpu).
#include <cstring>
#include <vector>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

constexpr uint64_t kCount = 4096;  // u32 elements per allocation
constexpr size_t kBytes = kCount * 4;

class GraphMemNodeTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuCtxGetDevice(&dev_));
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemAlloc(&out_, kBytes));
    ASSERT_CU_OK(cuMemsetD32(out_, 0, kCount));
    ASSERT_CU_OK(cuCtxSynchronize());
    ASSERT_CU_OK(cuGraphCreate(&g_, 0));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      if (exec_ != nullptr) cuGraphExecDestroy(exec_);
      if (g_ != nullptr) cuGraphDestroy(g_);
      cuStreamDestroy(s_);
      cuMemFree(out_);
      cuDeviceGraphMemTrim(dev_);
    }
    KernelTest::TearDown();
  }

  CUDA_MEM_ALLOC_NODE_PARAMS AllocParams(size_t bytes = kBytes) const {
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev_};
    p.bytesize = bytes;
    return p;
  }
  CUgraphNode AddAlloc(CUgraph g, CUdeviceptr* dptr, std::vector<CUgraphNode> deps = {}) {
    CUDA_MEM_ALLOC_NODE_PARAMS p = AllocParams();
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddMemAllocNode(&n, g, deps.data(), deps.size(), &p));
    *dptr = p.dptr;
    return n;
  }
  CUgraphNode AddFree(CUgraph g, CUdeviceptr dptr, std::vector<CUgraphNode> deps) {
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddMemFreeNode(&n, g, deps.data(), deps.size(), dptr));
    return n;
  }
  CUgraphNode AddFill(CUgraph g, CUdeviceptr p, uint32_t value, std::vector<CUgraphNode> deps) {
    uint64_t count = kCount;
    void* args[] = {&p, &value, &count};
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = fill_;
    kp.gridDimX = (kCount + 255) / 256, kp.gridDimY = 1, kp.gridDimZ = 1;
    kp.blockDimX = 256, kp.blockDimY = 1, kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddKernelNode(&n, g, deps.data(), deps.size(), &kp));
    return n;
  }
  CUgraphNode AddCopy(CUgraph g, CUdeviceptr dst, CUdeviceptr src, std::vector<CUgraphNode> deps) {
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = kBytes;
    c.Height = 1;
    c.Depth = 1;
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddMemcpyNode(&n, g, deps.data(), deps.size(), &c, ctx_));
    return n;
  }
  // alloc -> fill(value) -> copy to out_ -> free: a graph that frees its allocation.
  CUdeviceptr BuildFillCopyFree(CUgraph g, uint32_t value) {
    CUdeviceptr p = 0;
    CUgraphNode a = AddAlloc(g, &p);
    CUgraphNode f = AddFill(g, p, value, {a});
    CUgraphNode c = AddCopy(g, out_, p, {f});
    AddFree(g, p, {c});
    return p;
  }
  uint64_t GraphMem(CUgraphMem_attribute attr) {
    cuuint64_t v = 0;
    EXPECT_CU_OK(cuDeviceGetGraphMemAttribute(dev_, attr, &v));
    return v;
  }
  bool AllEqual(CUdeviceptr p, uint32_t value) {
    for (uint32_t v : ReadU32(p, kCount)) {
      if (v != value) return false;
    }
    return true;
  }

  CUdevice dev_ = 0;
  CUstream s_ = nullptr;
  CUdeviceptr out_ = 0;
  CUgraph g_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

TEST_F(GraphMemNodeTest, AllocationFreedInItsGraphServesEveryLaunch) {
  CUdeviceptr p = BuildFillCopyFree(g_, 7);
  EXPECT_NE(p, 0u);
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  for (int i = 0; i < 3; ++i) ASSERT_CU_OK(cuGraphLaunch(exec_, s_));  // freed each time
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(out_, 7));
}

TEST_F(GraphMemNodeTest, NodeParametersReadBack) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  CUgraphNode f = AddFree(g_, p, {a});
  CUDA_MEM_ALLOC_NODE_PARAMS got{};
  ASSERT_CU_OK(cuGraphMemAllocNodeGetParams(a, &got));
  EXPECT_EQ(got.dptr, p);
  EXPECT_EQ(got.bytesize, kBytes);
  EXPECT_EQ(got.poolProps.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(got.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.poolProps.location.id, dev_);
  CUdeviceptr freed = 0;
  ASSERT_CU_OK(cuGraphMemFreeNodeGetParams(f, &freed));
  EXPECT_EQ(freed, p);
  CUgraphNodeType t{};
  ASSERT_CU_OK(cuGraphNodeGetType(a, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  ASSERT_CU_OK(cuGraphNodeGetType(f, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_MEM_FREE);
  // Each getter refuses the other's node.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemAllocNodeGetParams(f, &got));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemFreeNodeGetParams(a, &freed));
}

// cuda.h (cuGraphLaunch): allocations a previous launch left unfreed make the
// next launch fail with CUDA_ERROR_INVALID_VALUE; after the graph they are
// usable by stream work until freed.
TEST_F(GraphMemNodeTest, UnfreedAllocationOutlivesTheLaunchAndBlocksTheNext) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  AddFill(g_, p, 5, {a});
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(p, 5));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));  // freed in stream order first: allocates again
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(p, 5));  // the address is the node's, launch after launch
  ASSERT_CU_OK(cuMemFree(p));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemFree(p));
}

TEST_F(GraphMemNodeTest, AutoFreeOnLaunchFreesWhatThePreviousLaunchLeft) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  AddFill(g_, p, 9, {a});
  ASSERT_CU_OK(
      cuGraphInstantiateWithFlags(&exec_, g_, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  for (int i = 0; i < 3; ++i) ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(p, 9));
  ASSERT_CU_OK(cuMemFree(p));
}

// A free node in another graph frees an allocation its own graph leaves.
TEST_F(GraphMemNodeTest, AnotherGraphsFreeNodeFreesTheAllocation) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  AddFill(g_, p, 3, {a});
  CUgraph freer = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&freer, 0));
  CUgraphNode c = AddCopy(freer, out_, p, {});
  AddFree(freer, p, {c});
  CUgraphExec fe = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphInstantiate(&fe, freer, 0));
  for (int i = 0; i < 2; ++i) {
    ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
    ASSERT_CU_OK(cuGraphLaunch(fe, s_));
  }
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(out_, 3));
  // The owning graph can no longer free it itself.
  CUgraphNode n = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, g_, &a, 1, p));
  ASSERT_CU_OK(cuGraphExecDestroy(fe));
  ASSERT_CU_OK(cuGraphDestroy(freer));
}

// cuda.h: what cuGraphAddMemFreeNode refuses with CUDA_ERROR_INVALID_VALUE.
TEST_F(GraphMemNodeTest, FreeNodeRefusesWhatNoAllocationNodeReturned) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  CUgraphNode f = AddFree(g_, p, {a});
  CUgraphNode n = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, g_, &f, 1, p)) << "twice";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, g_, &f, 1, out_)) << "cuMemAlloc'd";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, g_, &f, 1, 0)) << "null";
  // Freed in its own graph: no other graph, and no cuMemFree, frees it.
  CUgraph other = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&other, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, other, nullptr, 0, p));
  ASSERT_CU_OK(cuGraphDestroy(other));
}

TEST_F(GraphMemNodeTest, AllocationParametersAreChecked) {
  CUgraphNode n = nullptr;
  CUDA_MEM_ALLOC_NODE_PARAMS p = AllocParams(0);
  EXPECT_NE(cuGraphAddMemAllocNode(&n, g_, nullptr, 0, &p), CUDA_SUCCESS) << "zero bytes";
  p = AllocParams();
  p.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // "must be NONE"
  EXPECT_NE(cuGraphAddMemAllocNode(&n, g_, nullptr, 0, &p), CUDA_SUCCESS) << "IPC handle type";
  p = AllocParams();
  p.poolProps.location.id = 9999;
  EXPECT_NE(cuGraphAddMemAllocNode(&n, g_, nullptr, 0, &p), CUDA_SUCCESS) << "no such device";
  EXPECT_NE(cuGraphAddMemAllocNode(&n, g_, nullptr, 0, nullptr), CUDA_SUCCESS) << "no params";
  size_t count = 1;
  ASSERT_CU_OK(cuGraphGetNodes(g_, nullptr, &count));
  EXPECT_EQ(count, 0u);  // nothing was added
}

// cuda.h's restrictions on graphs with memory nodes: no node or edge removed,
// no clone, no clone into a child node, one executable graph at a time.
TEST_F(GraphMemNodeTest, GraphsWithMemoryNodesKeepTheirShape) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  CUgraphNode f = AddFill(g_, p, 1, {a});
  CUgraphNode fr = AddFree(g_, p, {f});
  EXPECT_NE(cuGraphDestroyNode(f), CUDA_SUCCESS);
  EXPECT_NE(cuGraphRemoveDependencies(g_, &a, &f, nullptr, 1), CUDA_SUCCESS);
  CUgraph clone = nullptr;
  EXPECT_NE(cuGraphClone(&clone, g_), CUDA_SUCCESS);
  CUgraph parent = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&parent, 0));
  CUgraphNode child = nullptr;
  EXPECT_NE(cuGraphAddChildGraphNode(&child, parent, nullptr, 0, g_), CUDA_SUCCESS);
  ASSERT_CU_OK(cuGraphDestroy(parent));
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  CUgraphExec second = nullptr;
  EXPECT_NE(cuGraphInstantiate(&second, g_, 0), CUDA_SUCCESS);
  ASSERT_CU_OK(cuGraphExecDestroy(exec_));
  exec_ = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));  // the first is gone
  // Their parameters cannot be changed.
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  np.free.dptr = p;
  EXPECT_NE(cuGraphNodeSetParams(fr, &np), CUDA_SUCCESS);
  EXPECT_NE(cuGraphExecNodeSetParams(exec_, fr, &np), CUDA_SUCCESS);
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
}

TEST_F(GraphMemNodeTest, GenericAddNodeMakesMemoryNodes) {
  CUgraphNodeParams ap{};
  ap.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  CUDA_MEM_ALLOC_NODE_PARAMS v1 = AllocParams();
  ap.alloc.poolProps = v1.poolProps;
  ap.alloc.bytesize = kBytes;
  CUgraphNode a = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&a, g_, nullptr, nullptr, 0, &ap));
  CUdeviceptr p = ap.alloc.dptr;
  ASSERT_NE(p, 0u);
  CUgraphNode f = AddFill(g_, p, 4, {a});
  CUgraphNode c = AddCopy(g_, out_, p, {f});
  CUgraphNodeParams fp{};
  fp.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  fp.free.dptr = p;
  CUgraphNode fr = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&fr, g_, &c, nullptr, 1, &fp));
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(out_, 4));
}

// cuMemAllocAsync/cuMemFreeAsync on a capturing stream make memory nodes.
class GraphMemCaptureTest : public GraphMemNodeTest {};

TEST_F(GraphMemCaptureTest, CapturedStreamOrderedAllocationBecomesMemoryNodes) {
  CUgraph captured = nullptr;
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocAsync(&p, kBytes, s_));
  ASSERT_CU_OK(LaunchArrayKernel(fill_, s_, p, 6, kCount));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(out_, p, kBytes, s_));
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamEndCapture(s_, &captured));
  size_t count = 0;
  ASSERT_CU_OK(cuGraphGetNodes(captured, nullptr, &count));
  std::vector<CUgraphNode> nodes(count);
  ASSERT_CU_OK(cuGraphGetNodes(captured, nodes.data(), &count));
  int allocs = 0, frees = 0;
  for (CUgraphNode n : nodes) {
    CUgraphNodeType t{};
    ASSERT_CU_OK(cuGraphNodeGetType(n, &t));
    if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      ++allocs;
      CUDA_MEM_ALLOC_NODE_PARAMS got{};
      ASSERT_CU_OK(cuGraphMemAllocNodeGetParams(n, &got));
      EXPECT_EQ(got.dptr, p);
      EXPECT_GE(got.bytesize, kBytes);
    }
    if (t == CU_GRAPH_NODE_TYPE_MEM_FREE) ++frees;
  }
  EXPECT_EQ(allocs, 1);
  EXPECT_EQ(frees, 1);
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, captured, 0));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(out_, 6));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuGraphDestroy(captured));
}

// The device's graph memory: used while a launch holds an allocation, kept
// reserved after the free until cuDeviceGraphMemTrim.
TEST_F(GraphMemNodeTest, GraphMemoryAttributesFollowLaunchesAndTrim) {
  ASSERT_CU_OK(cuDeviceGraphMemTrim(dev_));
  const uint64_t used0 = GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
  cuuint64_t zero = 0;
  ASSERT_CU_OK(cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
  ASSERT_CU_OK(cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
  cuuint64_t one = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuDeviceSetGraphMemAttribute(dev_, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one));
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  AddFill(g_, p, 2, {a});
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  const uint64_t used = GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
  EXPECT_GE(used, used0 + kBytes);
  EXPECT_GE(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), used);
  EXPECT_GE(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), used);
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0);
  EXPECT_GE(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), kBytes);  // kept for the next launch
  EXPECT_GE(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), used);
  ASSERT_CU_OK(cuDeviceGraphMemTrim(dev_));
  EXPECT_LT(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), kBytes);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGraphMemTrim(9999));
}

// ---- The simulator's model (sim-only) ----

class SimGraphMemNodeTest : public GraphMemNodeTest {
 protected:
  void SetUp() override {
    SKIP_UNLESS_SIM();
    GraphMemNodeTest::SetUp();
  }
  size_t FreeBytes() {
    size_t free = 0, total = 0;
    EXPECT_CU_OK(cuMemGetInfo(&free, &total));
    return free;
  }
};

// The bytes are charged on the node only from the launch to the trim.
TEST_F(SimGraphMemNodeTest, NodeChargesTheBytesFromLaunchToTrim) {
  ASSERT_CU_OK(cuDeviceGraphMemTrim(dev_));
  const size_t before = FreeBytes();
  CUdeviceptr p = 0;
  AddAlloc(g_, &p);
  EXPECT_EQ(FreeBytes(), before);  // an address only
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  EXPECT_EQ(FreeBytes(), before - kBytes);
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_EQ(FreeBytes(), before - kBytes);  // the graph pool keeps it
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));   // and reuses it
  EXPECT_EQ(FreeBytes(), before - kBytes);
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemFree(p));
  ASSERT_CU_OK(cuDeviceGraphMemTrim(dev_));
  EXPECT_EQ(FreeBytes(), before);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
}

// No room for a launch's allocations: OUT_OF_MEMORY, and nothing is held.
TEST_F(SimGraphMemNodeTest, LaunchWithoutRoomFailsAndHoldsNothing) {
  ASSERT_CU_OK(cuDeviceGraphMemTrim(dev_));
  CUdeviceptr small = 0;
  CUgraphNode a = AddAlloc(g_, &small);
  CUDA_MEM_ALLOC_NODE_PARAMS big = AllocParams(FreeBytes() + (64u << 20));
  CUgraphNode b = nullptr;
  ASSERT_CU_OK(cuGraphAddMemAllocNode(&b, g_, &a, 1, &big));  // an address: no room needed yet
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  const size_t before = FreeBytes();
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuGraphLaunch(exec_, s_));
  EXPECT_EQ(FreeBytes(), before);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(small));  // never allocated
}

// A free node in the allocation's own graph must be ordered after the allocation.
TEST_F(SimGraphMemNodeTest, FreeNodeBeforeItsAllocationIsRefused) {
  CUdeviceptr p = 0;
  AddAlloc(g_, &p);
  CUgraphNode n = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemFreeNode(&n, g_, nullptr, 0, p));
}

// The address stays valid while the executable graph exists, even when the
// graph it came from is gone.
TEST_F(SimGraphMemNodeTest, ExecKeepsTheAddressAfterItsGraphIsDestroyed) {
  CUdeviceptr p = 0;
  CUgraphNode a = AddAlloc(g_, &p);
  AddFill(g_, p, 8, {a});
  ASSERT_CU_OK(cuGraphInstantiate(&exec_, g_, 0));
  ASSERT_CU_OK(cuGraphDestroy(g_));
  g_ = nullptr;
  ASSERT_CU_OK(cuGraphLaunch(exec_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_TRUE(AllEqual(p, 8));
  ASSERT_CU_OK(cuGraphExecDestroy(exec_));
  exec_ = nullptr;
  EXPECT_TRUE(AllEqual(p, 8));  // still held by the launch: usable until freed
  ASSERT_CU_OK(cuMemFree(p));
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_NE(cuMemGetAddressRange(&base, &size, p), CUDA_SUCCESS);  // now gone
}

}  // namespace
}  // namespace vgpu::conformance
