// Stream capture into a graph, instantiation and launch.
#include <cstring>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class GraphTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemAlloc(&a_, kCount * 4));
    ASSERT_CU_OK(cuMemAlloc(&b_, kCount * 4));
    ASSERT_CU_OK(cuMemAllocHost(&host_, kCount * 4));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      cuStreamDestroy(s_);
      cuMemFree(a_);
      cuMemFree(b_);
      cuMemFreeHost(host_);
    }
    KernelTest::TearDown();
  }
  static constexpr size_t kCount = 2048;
  CUstream s_ = nullptr;
  CUdeviceptr a_ = 0, b_ = 0;
  void* host_ = nullptr;
};

TEST_F(GraphTest, CaptureKernelAndMemcpyNodesLaunchTwice) {
  ASSERT_CU_OK(cuMemsetD32(a_, 10, kCount));
  ASSERT_CU_OK(cuMemsetD32(b_, 0, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());  // memsets are asynchronous; s_ may not wait for them
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  ASSERT_CU_OK(cuStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);

  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(cuStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_CU_OK(Add(s_, a_, 1, kCount));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(b_, a_, kCount * 4, s_));
  ASSERT_CU_OK(cuMemcpyDtoHAsync(host_, b_, kCount * 4, s_));
  CUgraph graph = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &graph));
  ASSERT_NE(graph, nullptr);
  ASSERT_CU_OK(cuStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);

  // Captured work did not run.
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, 1)[0], 10u);
  EXPECT_EQ(ReadU32(b_, 1)[0], 0u);

  size_t num_nodes = 0;
  ASSERT_CU_OK(cuGraphGetNodes(graph, nullptr, &num_nodes));
  EXPECT_EQ(num_nodes, 3u);
  std::vector<CUgraphNode> nodes(num_nodes);
  ASSERT_CU_OK(cuGraphGetNodes(graph, nodes.data(), &num_nodes));
  int kernels = 0, memcpys = 0;
  for (CUgraphNode n : nodes) {
    CUgraphNodeType t;
    ASSERT_CU_OK(cuGraphNodeGetType(n, &t));
    kernels += t == CU_GRAPH_NODE_TYPE_KERNEL;
    memcpys += t == CU_GRAPH_NODE_TYPE_MEMCPY;
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(memcpys, 2);

  CUgraphExec exec = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(static_cast<uint32_t*>(host_)[0], 11u);
  EXPECT_EQ(static_cast<uint32_t*>(host_)[kCount - 1], 11u);
  ASSERT_CU_OK(cuGraphLaunch(exec, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(static_cast<uint32_t*>(host_)[0], 12u);
  EXPECT_EQ(ReadU32(a_ + 4 * (kCount - 1), 1)[0], 12u);
  EXPECT_EQ(ReadU32(b_, 1)[0], 12u);

  // A graph launches on another stream too, and the graph survives its exec.
  CUstream other;
  ASSERT_CU_OK(cuStreamCreate(&other, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec, other));
  ASSERT_CU_OK(cuStreamSynchronize(other));
  EXPECT_EQ(static_cast<uint32_t*>(host_)[0], 13u);
  ASSERT_CU_OK(cuStreamDestroy(other));
  ASSERT_CU_OK(cuGraphExecDestroy(exec));
  ASSERT_CU_OK(cuGraphDestroy(graph));
}

TEST_F(GraphTest, GraphLaunchIsAsynchronousAndOrdered) {
  ASSERT_CU_OK(cuMemsetD32(a_, 0, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU_OK(Sleep(s_, 100 * kMs));
  ASSERT_CU_OK(Fill(s_, a_, 5, kCount));
  CUgraph graph;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &graph));
  CUgraphExec exec;
  ASSERT_CU_OK(cuGraphInstantiate(&exec, graph, 0));
  double t0 = NowMs();
  ASSERT_CU_OK(cuGraphLaunch(exec, s_));
  ASSERT_CU_OK(cuMemsetD32Async(a_, 9, 1, s_));  // after the graph in stream order
  EXPECT_LT(NowMs() - t0, 60.0);
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_GE(NowMs() - t0, 95.0);
  std::vector<uint32_t> v = ReadU32(a_, 2);
  EXPECT_EQ(v[0], 9u);
  EXPECT_EQ(v[1], 5u);
  ASSERT_CU_OK(cuGraphExecDestroy(exec));
  ASSERT_CU_OK(cuGraphDestroy(graph));
}

TEST_F(GraphTest, CaptureErrors) {
  CUgraph graph = nullptr;
  // Not capturing.
  EXPECT_NE(CUDA_SUCCESS, cuStreamEndCapture(s_, &graph));
  // The legacy stream cannot be captured.
  EXPECT_NE(CUDA_SUCCESS, cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
  // Synchronizing a capturing stream is not allowed and invalidates the capture.
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_NE(CUDA_SUCCESS, cuStreamSynchronize(s_));
  CUresult r = cuStreamEndCapture(s_, &graph);
  EXPECT_NE(CUDA_SUCCESS, r);
  if (r == CUDA_SUCCESS && graph != nullptr) cuGraphDestroy(graph);
  CUstreamCaptureStatus st;
  ASSERT_CU_OK(cuStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
}

// cudart of CUDA 11 asks cuGetProcAddress for "cuGraphInstantiate" at 11000
// and calls what it gets with five arguments (error node, log buffer).
TEST_F(GraphTest, FiveArgumentInstantiateOfCuda11) {
  using Instantiate5 = CUresult(CUDAAPI*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st{};
  ASSERT_CU_OK(cuGetProcAddress("cuGraphInstantiate", &fn, 11000, 0, &st));
  ASSERT_NE(fn, nullptr);
  ASSERT_CU_OK(cuMemsetD32(a_, 0, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU_OK(Fill(s_, a_, 7, kCount));
  CUgraph graph;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &graph));
  CUgraphExec exec = nullptr;
  CUgraphNode error_node = reinterpret_cast<CUgraphNode>(1);
  char log[16] = "untouched";
  ASSERT_CU_OK(reinterpret_cast<Instantiate5>(fn)(&exec, graph, &error_node, log, sizeof log));
  EXPECT_EQ(error_node, nullptr);
  ASSERT_CU_OK(cuGraphLaunch(exec, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, 1)[0], 7u);
  ASSERT_CU_OK(cuGraphExecDestroy(exec));
  ASSERT_CU_OK(cuGraphDestroy(graph));
}

}  // namespace
}  // namespace vgpu::conformance
