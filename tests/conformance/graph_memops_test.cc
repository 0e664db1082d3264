// Explicit batch memory operation nodes: cuGraphAddBatchMemOpNode, its
// parameter queries and updates, the generic node API for the type, clones
// and executable-graph updates (issue 16: these were NOT_SUPPORTED stubs in
// the simulator). Suites not named Sim* assert only what cuda.h documents
// and also run on a real driver.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

uint32_t HostLoad32(const volatile uint32_t* p) {
  return __atomic_load_n(const_cast<const uint32_t*>(p), __ATOMIC_SEQ_CST);
}
void HostStore32(volatile uint32_t* p, uint32_t v) {
  __atomic_store_n(const_cast<uint32_t*>(p), v, __ATOMIC_SEQ_CST);
}

CUstreamBatchMemOpParams Write32(CUdeviceptr a, uint32_t v) {
  CUstreamBatchMemOpParams p{};
  p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p.writeValue.address = a;
  p.writeValue.value = v;
  return p;
}
CUstreamBatchMemOpParams Write64(CUdeviceptr a, uint64_t v) {
  CUstreamBatchMemOpParams p{};
  p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  p.writeValue.address = a;
  p.writeValue.value64 = v;
  return p;
}
CUstreamBatchMemOpParams Wait32(CUdeviceptr a, uint32_t v, unsigned flags) {
  CUstreamBatchMemOpParams p{};
  p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  p.waitValue.address = a;
  p.waitValue.value = v;
  p.waitValue.flags = flags;
  return p;
}

class BatchMemOpNodeTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    void* host = nullptr;
    ASSERT_CU_OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    host_ = static_cast<uint8_t*>(host);
    std::memset(host_, 0, 4096);
    ASSERT_CU_OK(cuMemHostGetDevicePointer(&dev_words_, host_, 0));
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuGraphCreate(&g_, 0));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      if (g_ != nullptr) cuGraphDestroy(g_);
      cuStreamDestroy(s_);
    }
    if (host_ != nullptr) cuMemFreeHost(host_);
    ContextTest::TearDown();
  }
  volatile uint32_t* Word32(size_t i) { return reinterpret_cast<volatile uint32_t*>(host_) + i; }
  uint64_t Word64(size_t i) {
    return __atomic_load_n(reinterpret_cast<uint64_t*>(host_ + 2048) + i, __ATOMIC_SEQ_CST);
  }
  CUdeviceptr Dev32(size_t i) { return dev_words_ + 4 * i; }
  CUdeviceptr Dev64(size_t i) { return dev_words_ + 2048 + 8 * i; }

  CUDA_BATCH_MEM_OP_NODE_PARAMS Params(std::vector<CUstreamBatchMemOpParams>& ops) {
    CUDA_BATCH_MEM_OP_NODE_PARAMS p{};
    p.ctx = ctx_;
    p.count = static_cast<unsigned>(ops.size());
    p.paramArray = ops.data();
    return p;
  }
  CUgraphNode AddNode(std::vector<CUstreamBatchMemOpParams> ops) {
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = Params(ops);
    CUgraphNode n = nullptr;
    EXPECT_CU_OK(cuGraphAddBatchMemOpNode(&n, g_, nullptr, 0, &p));
    return n;
  }
  void LaunchAndSync(CUgraphExec e) {
    ASSERT_CU_OK(cuGraphLaunch(e, s_));
    ASSERT_CU_OK(cuStreamSynchronize(s_));
  }

  uint8_t* host_ = nullptr;
  CUdeviceptr dev_words_ = 0;
  CUstream s_ = nullptr;
  CUgraph g_ = nullptr;
};

TEST_F(BatchMemOpNodeTest, NodeRunsItsOperationsInOrderAtEachLaunch) {
  CUgraphNode n = AddNode({Write32(Dev32(0), 7), Write64(Dev64(0), 0x1122334455667788ull),
                           Write32(Dev32(1), 9)});
  ASSERT_NE(n, nullptr);
  CUgraphNodeType type{};
  ASSERT_CU_OK(cuGraphNodeGetType(n, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  EXPECT_EQ(HostLoad32(Word32(0)), 0u) << "instantiation runs nothing";
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(0)), 7u);
  EXPECT_EQ(Word64(0), 0x1122334455667788ull);
  EXPECT_EQ(HostLoad32(Word32(1)), 9u);
  HostStore32(Word32(0), 0);
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(0)), 7u) << "a second launch runs the node again";
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(BatchMemOpNodeTest, WaitOperationHoldsTheLaunchUntilTheWordChanges) {
  AddNode({Wait32(Dev32(0), 1, CU_STREAM_WAIT_VALUE_GEQ), Write32(Dev32(1), 5)});
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 0u) << "the write ran before the wait was satisfied";
  HostStore32(Word32(0), 1);
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 5u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(BatchMemOpNodeTest, GetParamsReturnsWhatTheNodeWasGiven) {
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(2), 3), Wait32(Dev32(3), 4, CU_STREAM_WAIT_VALUE_EQ)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS in = Params(ops);
  CUgraphNode n = nullptr;
  ASSERT_CU_OK(cuGraphAddBatchMemOpNode(&n, g_, nullptr, 0, &in));
  ops.clear();  // the node keeps its own copy
  CUDA_BATCH_MEM_OP_NODE_PARAMS out{};
  ASSERT_CU_OK(cuGraphBatchMemOpNodeGetParams(n, &out));
  EXPECT_EQ(out.ctx, ctx_);
  ASSERT_EQ(out.count, 2u);
  ASSERT_NE(out.paramArray, nullptr);
  EXPECT_EQ(out.paramArray[0].operation, CU_STREAM_MEM_OP_WRITE_VALUE_32);
  EXPECT_EQ(out.paramArray[0].writeValue.address, Dev32(2));
  EXPECT_EQ(out.paramArray[0].writeValue.value, 3u);
  EXPECT_EQ(out.paramArray[1].operation, CU_STREAM_MEM_OP_WAIT_VALUE_32);
  EXPECT_EQ(out.paramArray[1].waitValue.address, Dev32(3));
  EXPECT_EQ(out.paramArray[1].waitValue.value, 4u);
  EXPECT_EQ(out.paramArray[1].waitValue.flags, static_cast<unsigned>(CU_STREAM_WAIT_VALUE_EQ));
}

TEST_F(BatchMemOpNodeTest, InvalidParametersAreRefused) {
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(0), 1)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = Params(ops);
  CUgraphNode n = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddBatchMemOpNode(&n, g_, nullptr, 0, nullptr));
  ops[0].operation = static_cast<CUstreamBatchMemOpType>(77);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddBatchMemOpNode(&n, g_, nullptr, 0, &p));
  ops[0] = Write32(Dev32(0) + 1, 1);  // misaligned word
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddBatchMemOpNode(&n, g_, nullptr, 0, &p));
  size_t count = 99;
  ASSERT_CU_OK(cuGraphGetNodes(g_, nullptr, &count));
  EXPECT_EQ(count, 0u) << "a refused node is not added";
}

TEST_F(BatchMemOpNodeTest, NodeSetParamsChangesLaterInstantiations) {
  CUgraphNode n = AddNode({Write32(Dev32(0), 1)});
  CUgraphExec before = nullptr, after = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&before, g_, 0));
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(1), 2), Write32(Dev32(2), 3)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = Params(ops);
  ASSERT_CU_OK(cuGraphBatchMemOpNodeSetParams(n, &p));
  ASSERT_CU_OK(cuGraphInstantiate(&after, g_, 0));
  LaunchAndSync(before);
  EXPECT_EQ(HostLoad32(Word32(0)), 1u);
  EXPECT_EQ(HostLoad32(Word32(1)), 0u) << "an executable graph keeps its parameters";
  LaunchAndSync(after);
  EXPECT_EQ(HostLoad32(Word32(1)), 2u);
  EXPECT_EQ(HostLoad32(Word32(2)), 3u);
  ASSERT_CU_OK(cuGraphExecDestroy(before));
  ASSERT_CU_OK(cuGraphExecDestroy(after));
}

TEST_F(BatchMemOpNodeTest, ExecSetParamsMayChangeAddressesAndValuesOnly) {
  CUgraphNode n = AddNode({Write32(Dev32(0), 1)});
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(4), 44)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = Params(ops);
  ASSERT_CU_OK(cuGraphExecBatchMemOpNodeSetParams(e, n, &p));
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(0)), 0u);
  EXPECT_EQ(HostLoad32(Word32(4)), 44u);
  // The graph's node is unchanged.
  CUDA_BATCH_MEM_OP_NODE_PARAMS got{};
  ASSERT_CU_OK(cuGraphBatchMemOpNodeGetParams(n, &got));
  ASSERT_EQ(got.count, 1u);
  EXPECT_EQ(got.paramArray[0].writeValue.address, Dev32(0));
  // Neither the type nor the count of the operations may change.
  ops[0] = Wait32(Dev32(4), 0, CU_STREAM_WAIT_VALUE_GEQ);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecBatchMemOpNodeSetParams(e, n, &p));
  std::vector<CUstreamBatchMemOpParams> two{Write32(Dev32(5), 1), Write32(Dev32(6), 1)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS q = Params(two);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecBatchMemOpNodeSetParams(e, n, &q));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(BatchMemOpNodeTest, GenericNodeApiAddsSetsAndExecSetsTheType) {
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(0), 11)};
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  p.memOp.ctx = ctx_;
  p.memOp.count = 1;
  p.memOp.paramArray = ops.data();
  CUgraphNode n = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&n, g_, nullptr, nullptr, 0, &p));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g_, 0));
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(0)), 11u);
  ops[0] = Write32(Dev32(1), 12);
  ASSERT_CU_OK(cuGraphExecNodeSetParams(e, n, &p));
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(1)), 12u);
  ops[0] = Write32(Dev32(2), 13);
  ASSERT_CU_OK(cuGraphNodeSetParams(n, &p));
  CUDA_BATCH_MEM_OP_NODE_PARAMS got{};
  ASSERT_CU_OK(cuGraphBatchMemOpNodeGetParams(n, &got));
  ASSERT_EQ(got.count, 1u);
  EXPECT_EQ(got.paramArray[0].writeValue.address, Dev32(2));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(BatchMemOpNodeTest, CloneAndExecUpdateCarryTheOperations) {
  AddNode({Write32(Dev32(0), 21)});
  CUgraph clone = nullptr;
  ASSERT_CU_OK(cuGraphClone(&clone, g_));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, clone, 0));
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(0)), 21u) << "the clone runs the node";
  // The same shape with another address and value: an update.
  CUgraph next = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&next, 0));
  std::vector<CUstreamBatchMemOpParams> ops{Write32(Dev32(1), 22)};
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = Params(ops);
  CUgraphNode n = nullptr;
  ASSERT_CU_OK(cuGraphAddBatchMemOpNode(&n, next, nullptr, 0, &p));
  CUgraphExecUpdateResultInfo info{};
  ASSERT_CU_OK(cuGraphExecUpdate(e, next, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  LaunchAndSync(e);
  EXPECT_EQ(HostLoad32(Word32(1)), 22u);
  // Another operation type is not an update.
  ops[0] = Wait32(Dev32(1), 0, CU_STREAM_WAIT_VALUE_GEQ);
  ASSERT_CU_OK(cuGraphBatchMemOpNodeSetParams(n, &p));
  EXPECT_NE(cuGraphExecUpdate(e, next, &info), CUDA_SUCCESS);
  EXPECT_NE(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuGraphDestroy(clone));
  ASSERT_CU_OK(cuGraphDestroy(next));
}

}  // namespace
}  // namespace vgpu::conformance
