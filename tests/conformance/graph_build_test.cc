// Building and editing graphs explicitly: edges, node removal, clones, child
// graphs, event nodes, disabled nodes, per-node updates of executable graphs,
// user objects, the generic node parameters, capture into an existing graph
// and capture dependencies (issue 16: these were NOT_SUPPORTED stubs in the
// simulator). Only what cuda.h documents is asserted; Sim* suites hold the
// simulator's own answers.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class GraphBuildTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemAlloc(&a_, kCount * 4));
    ASSERT_CU_OK(cuMemAlloc(&b_, kCount * 4));
    ASSERT_CU_OK(cuMemsetD32(a_, 0, kCount));
    ASSERT_CU_OK(cuMemsetD32(b_, 0, kCount));
    ASSERT_CU_OK(cuCtxSynchronize());
    ASSERT_CU_OK(cuGraphCreate(&g_, 0));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      if (g_ != nullptr) cuGraphDestroy(g_);
      cuStreamDestroy(s_);
      cuMemFree(a_);
      cuMemFree(b_);
    }
    KernelTest::TearDown();
  }

  static CUDA_KERNEL_NODE_PARAMS KernelParams(CUfunction f, void** args) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = (kCount + 255) / 256, p.gridDimY = 1, p.gridDimZ = 1;
    p.blockDimX = 256, p.blockDimY = 1, p.blockDimZ = 1;
    p.kernelParams = args;
    return p;
  }
  // A node running f(p, value, kCount) (fill_ or add_); the arguments are
  // copied when the node is made.
  CUgraphNode AddArrayNode(CUgraph g, CUfunction f, CUdeviceptr p, uint32_t value,
                           std::vector<CUgraphNode> deps = {}) {
    uint64_t count = kCount;
    void* args[] = {&p, &value, &count};
    CUDA_KERNEL_NODE_PARAMS kp = KernelParams(f, args);
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddKernelNode(&n, g, deps.data(), deps.size(), &kp));
    return n;
  }
  static CUDA_MEMSET_NODE_PARAMS MemsetParams(CUdeviceptr p, uint32_t value) {
    CUDA_MEMSET_NODE_PARAMS m{};
    m.dst = p;
    m.elementSize = 4;
    m.width = kCount;
    m.height = 1;
    m.value = value;
    return m;
  }
  CUgraphNode AddMemset(CUgraph g, CUdeviceptr p, uint32_t value,
                        std::vector<CUgraphNode> deps = {}) {
    CUDA_MEMSET_NODE_PARAMS m = MemsetParams(p, value);
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddMemsetNode(&n, g, deps.data(), deps.size(), &m, ctx_));
    return n;
  }
  CUgraphNode AddCopy(CUgraph g, CUdeviceptr dst, CUdeviceptr src,
                      std::vector<CUgraphNode> deps = {}) {
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = kCount * 4;
    c.Height = 1;
    c.Depth = 1;
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddMemcpyNode(&n, g, deps.data(), deps.size(), &c, ctx_));
    return n;
  }
  // Instantiates g, launches it once on s_ and waits.
  void RunOnce(CUgraph g) {
    CUgraphExec e = nullptr;
    ASSERT_CU_OK(cuGraphInstantiate(&e, g, 0));
    ASSERT_CU_OK(cuGraphLaunch(e, s_));
    ASSERT_CU_OK(cuStreamSynchronize(s_));
    ASSERT_CU_OK(cuGraphExecDestroy(e));
  }
  // The first and last element of p.
  std::pair<uint32_t, uint32_t> Ends(CUdeviceptr p) {
    std::vector<uint32_t> v = ReadU32(p, kCount);
    return {v.front(), v.back()};
  }
  size_t NumNodes(CUgraph g) {
    size_t n = 0;
    EXPECT_CU_OK(cuGraphGetNodes(g, nullptr, &n));
    return n;
  }
  size_t NumEdges(CUgraph g) {
    size_t n = 0;
    EXPECT_CU_OK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
    return n;
  }
  std::vector<CUgraphNode> DepsOf(CUgraphNode node) {
    size_t n = 0;
    EXPECT_CU_OK(cuGraphNodeGetDependencies(node, nullptr, nullptr, &n));
    std::vector<CUgraphNode> out(n);
    if (n != 0) {
      EXPECT_CU_OK(cuGraphNodeGetDependencies(node, out.data(), nullptr, &n));
    }
    return out;
  }

  static constexpr size_t kCount = 1024;
  CUstream s_ = nullptr;
  CUdeviceptr a_ = 0, b_ = 0;
  CUgraph g_ = nullptr;
};

using Pair = std::pair<uint32_t, uint32_t>;

// fill(a, 7) and add(a, 1) in either order: the edges decide 8 or 7.
TEST_F(GraphBuildTest, AddedAndRemovedDependenciesChangeEdgesAndOrder) {
  CUgraphNode add = AddArrayNode(g_, add_, a_, 1);
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 7);
  EXPECT_EQ(NumEdges(g_), 0u);
  ASSERT_CU_OK(cuGraphAddDependencies(g_, &fill, &add, nullptr, 1));  // add after fill
  EXPECT_EQ(NumEdges(g_), 1u);
  EXPECT_EQ(DepsOf(add), std::vector<CUgraphNode>{fill});
  RunOnce(g_);
  EXPECT_EQ(Ends(a_), Pair(8, 8));

  ASSERT_CU_OK(cuGraphRemoveDependencies(g_, &fill, &add, nullptr, 1));
  EXPECT_EQ(NumEdges(g_), 0u);
  ASSERT_CU_OK(cuGraphAddDependencies(g_, &add, &fill, nullptr, 1));  // fill after add
  EXPECT_EQ(DepsOf(fill), std::vector<CUgraphNode>{add});
  EXPECT_TRUE(DepsOf(add).empty());
  RunOnce(g_);
  EXPECT_EQ(Ends(a_), Pair(7, 7));
}

TEST_F(GraphBuildTest, DependencyEditErrors) {
  CUgraphNode x = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode y = AddArrayNode(g_, add_, a_, 1, {x});
  CUgraph other = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&other, 0));
  CUgraphNode z = nullptr;
  ASSERT_CU_OK(cuGraphAddEmptyNode(&z, other, nullptr, 0));
  struct Case {
    const char* what;
    bool add;
    CUgraphNode from, to;
  };
  const Case cases[] = {
      {"existing edge added again", true, x, y},
      {"missing edge removed", false, y, x},
      {"node of another graph", true, z, y},
      {"node of another graph (remove)", false, x, z},
  };
  for (const Case& c : cases) {
    CUresult r = c.add ? cuGraphAddDependencies(g_, &c.from, &c.to, nullptr, 1)
                       : cuGraphRemoveDependencies(g_, &c.from, &c.to, nullptr, 1);
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, r) << c.what;
  }
  EXPECT_EQ(NumEdges(g_), 1u);  // nothing changed
  EXPECT_CU_OK(cuGraphAddDependencies(g_, nullptr, nullptr, nullptr, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddDependencies(g_, nullptr, nullptr, nullptr, 1));
  ASSERT_CU_OK(cuGraphDestroy(other));
}

TEST_F(GraphBuildTest, DestroyedNodeGoesWithItsEdges) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode add5 = AddArrayNode(g_, add_, a_, 5, {fill});
  CUgraphNode add10 = AddArrayNode(g_, add_, a_, 10, {add5});
  EXPECT_EQ(NumEdges(g_), 2u);
  ASSERT_CU_OK(cuGraphDestroyNode(add5));
  EXPECT_EQ(NumNodes(g_), 2u);
  EXPECT_EQ(NumEdges(g_), 0u);
  EXPECT_TRUE(DepsOf(add10).empty());
  ASSERT_CU_OK(cuGraphAddDependencies(g_, &fill, &add10, nullptr, 1));
  RunOnce(g_);
  EXPECT_EQ(Ends(a_), Pair(11, 11));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphDestroyNode(nullptr));
}

TEST_F(GraphBuildTest, CloneRunsLikeTheOriginalAndFindInCloneMapsNodes) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 2);
  CUgraphNode add = AddArrayNode(g_, add_, a_, 3, {fill});
  CUgraph clone = nullptr;
  ASSERT_CU_OK(cuGraphClone(&clone, g_));
  EXPECT_EQ(NumNodes(clone), 2u);
  EXPECT_EQ(NumEdges(clone), 1u);
  CUgraphNode cfill = nullptr, cadd = nullptr;
  ASSERT_CU_OK(cuGraphNodeFindInClone(&cfill, fill, clone));
  ASSERT_CU_OK(cuGraphNodeFindInClone(&cadd, add, clone));
  EXPECT_NE(cfill, fill);
  EXPECT_EQ(DepsOf(cadd), std::vector<CUgraphNode>{cfill});
  CUgraphNodeType t;
  ASSERT_CU_OK(cuGraphNodeGetType(cadd, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_KERNEL);
  // The clone is independent of the original.
  ASSERT_CU_OK(cuGraphDestroy(g_));
  g_ = nullptr;
  RunOnce(clone);
  EXPECT_EQ(Ends(a_), Pair(5, 5));
  // A graph that is not a clone of the node's graph.
  CUgraph unrelated = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&unrelated, 0));
  CUgraphNode found = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeFindInClone(&found, cadd, unrelated));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeFindInClone(nullptr, cadd, clone));
  ASSERT_CU_OK(cuGraphDestroy(unrelated));
  ASSERT_CU_OK(cuGraphDestroy(clone));
}

TEST_F(GraphBuildTest, ChildGraphExecutesAsAClone) {
  CUgraph child = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&child, 0));
  CUgraphNode cfill = AddArrayNode(child, fill_, a_, 4);
  AddArrayNode(child, add_, a_, 1, {cfill});
  CUgraphNode node = nullptr;
  ASSERT_CU_OK(cuGraphAddChildGraphNode(&node, g_, nullptr, 0, child));
  AddCopy(g_, b_, a_, {node});
  // The node holds a clone: later edits of `child` do not reach it.
  AddArrayNode(child, add_, a_, 100);
  CUgraph embedded = nullptr;
  ASSERT_CU_OK(cuGraphChildGraphNodeGetGraph(node, &embedded));
  EXPECT_NE(embedded, child);
  EXPECT_EQ(NumNodes(embedded), 2u);
  CUgraphNodeType t;
  ASSERT_CU_OK(cuGraphNodeGetType(node, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_GRAPH);
  RunOnce(g_);
  EXPECT_EQ(Ends(b_), Pair(5, 5));
  ASSERT_CU_OK(cuGraphDestroy(child));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddChildGraphNode(&node, g_, nullptr, 0, nullptr));
}

TEST_F(GraphBuildTest, ExecChildGraphNodeSetParamsSwapsTheChildsWork) {
  CUgraph child = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&child, 0));
  AddArrayNode(child, fill_, a_, 4);
  CUgraphNode node = nullptr;
  ASSERT_CU_OK(cuGraphAddChildGraphNode(&node, g_, nullptr, 0, child));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  CUgraph same_shape = nullptr, other_shape = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&same_shape, 0));
  ASSERT_CU_OK(cuGraphCreate(&other_shape, 0));
  AddArrayNode(same_shape, fill_, a_, 9);
  AddMemset(other_shape, a_, 1);
  ASSERT_CU_OK(cuGraphExecChildGraphNodeSetParams(e, node, same_shape));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(9, 9));
  EXPECT_NE(cuGraphExecChildGraphNodeSetParams(e, node, other_shape), CUDA_SUCCESS);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  for (CUgraph g : {child, same_shape, other_shape}) ASSERT_CU_OK(cuGraphDestroy(g));
}

// Graph 1 (stream 1): sleep, fill(a, 9), record. Graph 2 (stream 2): wait, copy a to b.
TEST_F(GraphBuildTest, EventRecordAndWaitNodesOrderWorkAcrossStreams) {
  CUstream s2 = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent start = nullptr, done = nullptr, other = nullptr;
  ASSERT_CU_OK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuEventCreate(&done, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuEventCreate(&other, CU_EVENT_DEFAULT));
  uint64_t ns = 50 * kMs;
  void* sleep_args[] = {&ns};
  CUDA_KERNEL_NODE_PARAMS sp = KernelParams(sleep_, sleep_args);
  sp.gridDimX = 1, sp.blockDimX = 32;
  CUgraphNode sleep = nullptr, record = nullptr, wait = nullptr;
  ASSERT_CU_OK(cuGraphAddKernelNode(&sleep, g_, nullptr, 0, &sp));
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 9, {sleep});
  ASSERT_CU_OK(cuGraphAddEventRecordNode(&record, g_, &fill, 1, other));
  ASSERT_CU_OK(cuGraphEventRecordNodeSetEvent(record, done));
  CUevent got = nullptr;
  ASSERT_CU_OK(cuGraphEventRecordNodeGetEvent(record, &got));
  EXPECT_EQ(got, done);
  CUgraph g2 = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&g2, 0));
  ASSERT_CU_OK(cuGraphAddEventWaitNode(&wait, g2, nullptr, 0, done));
  ASSERT_CU_OK(cuGraphEventWaitNodeGetEvent(wait, &got));
  EXPECT_EQ(got, done);
  AddCopy(g2, b_, a_, {wait});
  CUgraphExec e1 = nullptr, e2 = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e1, g_, 0));
  ASSERT_CU_OK(cuGraphInstantiate(&e2, g2, 0));
  ASSERT_CU_OK(cuEventRecord(start, s_));
  ASSERT_CU_OK(cuGraphLaunch(e1, s_));
  ASSERT_CU_OK(cuGraphLaunch(e2, s2));
  ASSERT_CU_OK(cuStreamSynchronize(s2));
  EXPECT_EQ(Ends(b_), Pair(9, 9));
  ASSERT_CU_OK(cuEventSynchronize(done));
  float ms = 0;
  ASSERT_CU_OK(cuEventElapsedTime(&ms, start, done));
  EXPECT_GE(ms, 40.0f);
  ASSERT_CU_OK(cuGraphExecDestroy(e1));
  ASSERT_CU_OK(cuGraphExecDestroy(e2));
  ASSERT_CU_OK(cuGraphDestroy(g2));
  for (CUevent ev : {start, done, other}) ASSERT_CU_OK(cuEventDestroy(ev));
  ASSERT_CU_OK(cuStreamDestroy(s2));
}

TEST_F(GraphBuildTest, DisabledNodesAreSkipped) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode add = AddArrayNode(g_, add_, a_, 10, {fill});
  CUgraphNode set = AddMemset(g_, b_, 3, {add});
  CUgraphNode empty = nullptr;
  ASSERT_CU_OK(cuGraphAddEmptyNode(&empty, g_, &set, 1));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  ASSERT_CU_OK(cuGraphNodeSetEnabled(e, add, 0));
  ASSERT_CU_OK(cuGraphNodeSetEnabled(e, set, 0));
  unsigned enabled = 1;
  ASSERT_CU_OK(cuGraphNodeGetEnabled(e, add, &enabled));
  EXPECT_EQ(enabled, 0u);
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(1, 1));
  EXPECT_EQ(Ends(b_), Pair(0, 0));
  ASSERT_CU_OK(cuGraphNodeSetEnabled(e, add, 1));
  ASSERT_CU_OK(cuGraphNodeGetEnabled(e, add, &enabled));
  EXPECT_EQ(enabled, 1u);
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(11, 11));
  EXPECT_EQ(Ends(b_), Pair(0, 0));
  // Only kernel, memset and memcpy nodes can be disabled.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeSetEnabled(e, empty, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeSetEnabled(nullptr, add, 0));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

std::atomic<int> g_host_calls{0};
void CountHostCall(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }
void CountTenHostCalls(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(10); }

TEST_F(GraphBuildTest, ExecSetParamsChangeTheNextLaunchOnly) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode set = AddMemset(g_, b_, 0x11);
  CUDA_HOST_NODE_PARAMS hp{CountHostCall, &g_host_calls};
  CUgraphNode host = nullptr;
  ASSERT_CU_OK(cuGraphAddHostNode(&host, g_, &fill, 1, &hp));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  g_host_calls = 0;
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(1, 1));
  EXPECT_EQ(Ends(b_), Pair(0x11, 0x11));
  EXPECT_EQ(g_host_calls.load(), 1);

  CUdeviceptr a = a_;
  uint32_t value = 2;
  uint64_t count = kCount;
  void* args[] = {&a, &value, &count};
  CUDA_KERNEL_NODE_PARAMS kp = KernelParams(fill_, args);
  ASSERT_CU_OK(cuGraphExecKernelNodeSetParams(e, fill, &kp));
  CUDA_MEMSET_NODE_PARAMS mp = MemsetParams(b_, 0x22);
  ASSERT_CU_OK(cuGraphExecMemsetNodeSetParams(e, set, &mp, ctx_));
  CUDA_HOST_NODE_PARAMS hp10{CountTenHostCalls, &g_host_calls};
  ASSERT_CU_OK(cuGraphExecHostNodeSetParams(e, host, &hp10));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(2, 2));
  EXPECT_EQ(Ends(b_), Pair(0x22, 0x22));
  EXPECT_EQ(g_host_calls.load(), 11);
  // The graph's own nodes kept their parameters.
  CUDA_MEMSET_NODE_PARAMS now{};
  ASSERT_CU_OK(cuGraphMemsetNodeGetParams(set, &now));
  EXPECT_EQ(now.value, 0x11u);
  // Wrong node type, no such node, null parameters.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecMemsetNodeSetParams(e, fill, &mp, ctx_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(e, set, &kp));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecHostNodeSetParams(e, host, nullptr));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphBuildTest, ExecMemcpyNodeSetParamsRetargetsTheCopy) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 6);
  CUgraphNode copy = AddCopy(g_, b_, a_, {fill});
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  CUdeviceptr c = 0;
  ASSERT_CU_OK(cuMemAlloc(&c, kCount * 4));
  ASSERT_CU_OK(cuMemsetD32(c, 0, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  CUDA_MEMCPY3D p{};
  ASSERT_CU_OK(cuGraphMemcpyNodeGetParams(copy, &p));
  p.dstDevice = c;
  ASSERT_CU_OK(cuGraphExecMemcpyNodeSetParams(e, copy, &p, ctx_));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(c), Pair(6, 6));
  EXPECT_EQ(Ends(b_), Pair(0, 0));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuMemFree(c));
}

TEST_F(GraphBuildTest, GraphNodeSetParamsChangeLaterInstantiations) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode set = AddMemset(g_, b_, 1);
  CUdeviceptr a = a_;
  uint32_t value = 3;
  uint64_t count = kCount;
  void* args[] = {&a, &value, &count};
  CUDA_KERNEL_NODE_PARAMS kp = KernelParams(fill_, args);
  ASSERT_CU_OK(cuGraphKernelNodeSetParams(fill, &kp));
  CUDA_MEMSET_NODE_PARAMS mp = MemsetParams(b_, 4);
  ASSERT_CU_OK(cuGraphMemsetNodeSetParams(set, &mp));
  CUDA_MEMSET_NODE_PARAMS back{};
  ASSERT_CU_OK(cuGraphMemsetNodeGetParams(set, &back));
  EXPECT_EQ(back.value, 4u);
  RunOnce(g_);
  EXPECT_EQ(Ends(a_), Pair(3, 3));
  EXPECT_EQ(Ends(b_), Pair(4, 4));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemsetNodeSetParams(fill, &mp));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeSetParams(set, &kp));
  CUDA_HOST_NODE_PARAMS hp{CountHostCall, &g_host_calls};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphHostNodeSetParams(set, &hp));
}

// ---- User objects ----

std::atomic<int> g_destroyed{0};
void CountDestroy(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

// The destructor may run asynchronously: wait up to a few seconds for it.
int DestroyedAfterWait(int want) {
  for (int i = 0; i < 500 && g_destroyed.load() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return g_destroyed.load();
}

TEST_F(GraphBuildTest, UserObjectDestructorRunsOnceAfterGraphAndExecAreGone) {
  g_destroyed = 0;
  CUuserObject obj = nullptr;
  ASSERT_CU_OK(
      cuUserObjectCreate(&obj, &g_destroyed, CountDestroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  // The graph takes over the caller's reference.
  ASSERT_CU_OK(cuGraphRetainUserObject(g_, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
  AddArrayNode(g_, fill_, a_, 1);
  CUgraph clone = nullptr;
  ASSERT_CU_OK(cuGraphClone(&clone, g_));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuGraphDestroy(g_));
  g_ = nullptr;
  ASSERT_CU_OK(cuGraphDestroy(clone));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(g_destroyed.load(), 0) << "the exec still holds a reference";
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(DestroyedAfterWait(1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(g_destroyed.load(), 1);
}

TEST_F(GraphBuildTest, UserObjectReferenceCounts) {
  g_destroyed = 0;
  CUuserObject obj = nullptr;
  ASSERT_CU_OK(
      cuUserObjectCreate(&obj, &g_destroyed, CountDestroy, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  ASSERT_CU_OK(cuUserObjectRetain(obj, 1));              // 3
  ASSERT_CU_OK(cuGraphRetainUserObject(g_, obj, 2, 0));  // 5, the graph holds 2
  ASSERT_CU_OK(cuGraphReleaseUserObject(g_, obj, 1));    // 4
  ASSERT_CU_OK(cuUserObjectRelease(obj, 3));             // 1: the graph's
  ASSERT_CU_OK(cuCtxSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(g_destroyed.load(), 0);
  ASSERT_CU_OK(cuGraphDestroy(g_));
  g_ = nullptr;
  EXPECT_EQ(DestroyedAfterWait(1), 1);
}

TEST_F(GraphBuildTest, UserObjectErrors) {
  CUuserObject obj = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuUserObjectCreate(nullptr, nullptr, CountDestroy, 1,
                                                         CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuUserObjectCreate(&obj, nullptr, CountDestroy, 0, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuUserObjectCreate(&obj, nullptr, CountDestroy, 1, 0));
  ASSERT_CU_OK(
      cuUserObjectCreate(&obj, &g_destroyed, CountDestroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuUserObjectRetain(obj, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuUserObjectRelease(obj, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphRetainUserObject(g_, obj, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphRetainUserObject(g_, obj, 1, 0x100));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphReleaseUserObject(g_, obj, 0));
  ASSERT_CU_OK(cuUserObjectRelease(obj, 1));
}

// ---- Generic node parameters, attributes, DOT, conditional handles ----

TEST_F(GraphBuildTest, GenericNodeParamsAddSetAndExecSet) {
  CUdeviceptr a = a_;
  uint32_t value = 5;
  uint64_t count = kCount;
  void* args[] = {&a, &value, &count};
  CUgraphNodeParams kp{};
  kp.type = CU_GRAPH_NODE_TYPE_KERNEL;
  kp.kernel.func = fill_;
  kp.kernel.gridDimX = (kCount + 255) / 256, kp.kernel.gridDimY = 1, kp.kernel.gridDimZ = 1;
  kp.kernel.blockDimX = 256, kp.kernel.blockDimY = 1, kp.kernel.blockDimZ = 1;
  kp.kernel.kernelParams = args;
  CUgraphNode k = nullptr, m = nullptr, empty = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&k, g_, nullptr, nullptr, 0, &kp));
  CUgraphNodeParams mp{};
  mp.type = CU_GRAPH_NODE_TYPE_MEMSET;
  mp.memset.dst = b_;
  mp.memset.elementSize = 4;
  mp.memset.width = kCount;
  mp.memset.height = 1;
  mp.memset.value = 8;
  mp.memset.ctx = ctx_;
  ASSERT_CU_OK(cuGraphAddNode(&m, g_, &k, nullptr, 1, &mp));
  CUgraphNodeParams ep{};
  ep.type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_CU_OK(cuGraphAddNode(&empty, g_, &m, nullptr, 1, &ep));
  CUgraphNodeType t;
  ASSERT_CU_OK(cuGraphNodeGetType(m, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_MEMSET);
  value = 6;  // a new value through cuGraphNodeSetParams
  ASSERT_CU_OK(cuGraphNodeSetParams(k, &kp));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(a_), Pair(6, 6));
  EXPECT_EQ(Ends(b_), Pair(8, 8));
  mp.memset.value = 9;
  ASSERT_CU_OK(cuGraphExecNodeSetParams(e, m, &mp));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Ends(b_), Pair(9, 9));
  // A node of another type, reserved fields set, a null pointer.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphNodeSetParams(m, &kp));
  CUgraphNodeParams bad = ep;
  bad.reserved0[1] = 1;
  CUgraphNode n = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddNode(&n, g_, nullptr, nullptr, 0, &bad));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddNode(&n, g_, nullptr, nullptr, 0, nullptr));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphBuildTest, KernelNodeAttributesAreKeptPerNode) {
  CUgraphNode k1 = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode k2 = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode set = AddMemset(g_, b_, 1);
  CUkernelNodeAttrValue v{};
  v.priority = 1;
  ASSERT_CU_OK(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
  CUkernelNodeAttrValue got{};
  ASSERT_CU_OK(cuGraphKernelNodeGetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
  EXPECT_EQ(got.priority, 1);
  ASSERT_CU_OK(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
  EXPECT_EQ(got.priority, 0);
  ASSERT_CU_OK(cuGraphKernelNodeCopyAttributes(k2, k1));
  ASSERT_CU_OK(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
  EXPECT_EQ(got.priority, 1);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuGraphKernelNodeGetAttribute(set, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeCopyAttributes(set, k1));
}

TEST_F(GraphBuildTest, DebugDotPrintWritesTheGraph) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  AddMemset(g_, b_, 1, {fill});
  char path[] = "/tmp/vgpu-graph-dot-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_CU_OK(cuGraphDebugDotPrint(g_, path, 0));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  EXPECT_NE(text.str().find("digraph"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("->"), std::string::npos) << text.str();
  EXPECT_NE(cuGraphDebugDotPrint(g_, "/nonexistent-dir/x.dot", 0), CUDA_SUCCESS);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphDebugDotPrint(g_, nullptr, 0));
}

TEST_F(GraphBuildTest, ConditionalHandleCreate) {
  CUgraphConditionalHandle h1 = 0, h2 = 0;
  ASSERT_CU_OK(cuGraphConditionalHandleCreate(&h1, g_, ctx_, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
  ASSERT_CU_OK(cuGraphConditionalHandleCreate(&h2, g_, ctx_, 0, 0));
  EXPECT_NE(h1, h2);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphConditionalHandleCreate(nullptr, g_, ctx_, 0, 0));
}

TEST_F(GraphBuildTest, MemAllocAndFreeNodeGettersRefuseOtherNodes) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 1);
  CUDA_MEM_ALLOC_NODE_PARAMS ap{};
  CUdeviceptr dptr = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemAllocNodeGetParams(fill, &ap));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphMemFreeNodeGetParams(fill, &dptr));
}

// ---- Capture ----

TEST_F(GraphBuildTest, ThreadExchangeStreamCaptureModeReturnsThePreviousMode) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);  // every thread starts in global mode
  mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  ASSERT_CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
  // Another thread has its own mode.
  CUstreamCaptureMode there = CU_STREAM_CAPTURE_MODE_RELAXED;
  std::thread([&] { cuThreadExchangeStreamCaptureMode(&there); }).join();
  EXPECT_EQ(there, CU_STREAM_CAPTURE_MODE_GLOBAL);
  mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  ASSERT_CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuThreadExchangeStreamCaptureMode(nullptr));
}

TEST_F(GraphBuildTest, BeginCaptureToGraphAppendsToAnExistingGraph) {
  CUgraphNode fill = AddArrayNode(g_, fill_, a_, 3);
  ASSERT_CU_OK(
      cuStreamBeginCaptureToGraph(s_, g_, &fill, nullptr, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  ASSERT_CU_OK(cuStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_CU_OK(Add(s_, a_, 4, kCount));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(b_, a_, kCount * 4, s_));
  CUgraph out = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &out));
  EXPECT_EQ(out, g_);
  EXPECT_EQ(NumNodes(g_), 3u);
  EXPECT_EQ(NumEdges(g_), 2u);
  size_t n = 0;
  ASSERT_CU_OK(cuGraphNodeGetDependentNodes(fill, nullptr, nullptr, &n));
  EXPECT_EQ(n, 1u);
  RunOnce(g_);
  EXPECT_EQ(Ends(b_), Pair(7, 7));
}

TEST_F(GraphBuildTest, UpdateCaptureDependenciesAddsAndSets) {
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(Fill(s_, a_, 1, kCount));
  CUstreamCaptureStatus st;
  CUgraph g = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t n = 0;
  ASSERT_CU_OK(cuStreamGetCaptureInfo(s_, &st, nullptr, &g, &deps, nullptr, &n));
  ASSERT_EQ(n, 1u);
  CUgraphNode fill = deps[0];
  // A node added to the capture graph directly joins the capture's dependencies.
  CUgraphNode set = AddMemset(g, b_, 5);
  ASSERT_CU_OK(
      cuStreamUpdateCaptureDependencies(s_, &set, nullptr, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
  ASSERT_CU_OK(cuStreamGetCaptureInfo(s_, &st, nullptr, nullptr, &deps, nullptr, &n));
  EXPECT_EQ(n, 2u);
  ASSERT_CU_OK(Add(s_, a_, 1, kCount));  // depends on fill and set
  ASSERT_CU_OK(cuStreamGetCaptureInfo(s_, &st, nullptr, nullptr, &deps, nullptr, &n));
  ASSERT_EQ(n, 1u);
  CUgraphNode add = deps[0];
  EXPECT_EQ(DepsOf(add).size(), 2u);
  // SET replaces them: the next node depends on fill alone.
  ASSERT_CU_OK(
      cuStreamUpdateCaptureDependencies(s_, &fill, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(b_, a_, 4, s_));
  ASSERT_CU_OK(cuStreamGetCaptureInfo(s_, &st, nullptr, nullptr, &deps, nullptr, &n));
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(DepsOf(deps[0]), std::vector<CUgraphNode>{fill});
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamUpdateCaptureDependencies(s_, &fill, nullptr, 1, 7));
  CUgraph out = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &out));
  EXPECT_EQ(NumNodes(out), 4u);
  // Not capturing any more.
  EXPECT_CU(
      CUDA_ERROR_ILLEGAL_STATE,
      cuStreamUpdateCaptureDependencies(s_, &fill, nullptr, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
  ASSERT_CU_OK(cuGraphDestroy(out));
}

// ---- Simulator-only ----

class SimGraphBuildTest : public GraphBuildTest {
 protected:
  void SetUp() override {
    SKIP_UNLESS_SIM();
    GraphBuildTest::SetUp();
  }
};

// Node types the sim does not model are refused by the generic entry point.
TEST_F(SimGraphBuildTest, UnmodelledNodeTypesAreNotSupported) {
  CUgraphNodeParams p{};
  CUgraphNode n = nullptr;
  // External semaphore nodes (external_test.cc) and memory nodes
  // (graph_memnodes_test.cc) are modelled.
  for (CUgraphNodeType t : {CU_GRAPH_NODE_TYPE_CONDITIONAL}) {
    p.type = t;
    EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddNode(&n, g_, nullptr, nullptr, 0, &p)) << t;
  }
  int bogus = 999;
  std::memcpy(&p.type, &bogus, sizeof bogus);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddNode(&n, g_, nullptr, nullptr, 0, &p));
}

// A cycle made with cuGraphAddDependencies is refused at instantiation.
TEST_F(SimGraphBuildTest, CycleFailsInstantiation) {
  CUgraphNode x = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode y = AddArrayNode(g_, add_, a_, 1, {x});
  ASSERT_CU_OK(cuGraphAddDependencies(g_, &y, &x, nullptr, 1));
  CUgraphExec e = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiate(&e, g_, 0));
}

// Non-default edge data (ports, programmatic edges) is not modelled.
TEST_F(SimGraphBuildTest, NonDefaultEdgeDataIsRefused) {
  CUgraphNode x = AddArrayNode(g_, fill_, a_, 1);
  CUgraphNode y = AddArrayNode(g_, add_, a_, 1);
  CUgraphEdgeData d{};
  d.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddDependencies(g_, &x, &y, &d, 1));
  d = CUgraphEdgeData{};
  EXPECT_CU_OK(cuGraphAddDependencies(g_, &x, &y, &d, 1));
}

}  // namespace
}  // namespace vgpu::conformance
