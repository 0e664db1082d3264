// Stream memory operations (cuStreamWaitValue*/WriteValue*/BatchMemOp),
// cuPointerSetAttribute, stream attributes and cuStreamGetDevice, and the
// reservation semantics of memory pools (issue 16). Suites not named Sim*
// assert only what cuda.h documents and also run on a real driver.
#include <chrono>
#include <deque>
#include <cstring>
#include <thread>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

void HostStore32(volatile uint32_t* p, uint32_t v) {
  __atomic_store_n(const_cast<uint32_t*>(p), v, __ATOMIC_SEQ_CST);
}
void HostStore64(volatile uint64_t* p, uint64_t v) {
  __atomic_store_n(const_cast<uint64_t*>(p), v, __ATOMIC_SEQ_CST);
}
uint32_t HostLoad32(volatile uint32_t* p) { return __atomic_load_n(const_cast<uint32_t*>(p), __ATOMIC_SEQ_CST); }

// Polls cuStreamQuery until the stream is idle or `ms` passed.
CUresult QueryFor(CUstream s, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  CUresult r;
  while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return r;
}

// ---- Stream memory operations ---------------------------------------------

class StreamMemOpTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    void* host = nullptr;
    ASSERT_CU_OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    host_ = static_cast<uint8_t*>(host);
    std::memset(host_, 0, 4096);
    ASSERT_CU_OK(cuMemHostGetDevicePointer(&host_dev_, host_, 0));
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    int v = 0;
    ASSERT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev_));
    has64_ = v != 0;
    ASSERT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev_));
    has_nor_ = v != 0;
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      cuStreamDestroy(s_);
    }
    if (host_ != nullptr) cuMemFreeHost(host_);
    ContextTest::TearDown();
  }
  volatile uint32_t* Word32(size_t i) { return reinterpret_cast<volatile uint32_t*>(host_) + i; }
  volatile uint64_t* Word64(size_t i) { return reinterpret_cast<volatile uint64_t*>(host_ + 2048) + i; }
  CUdeviceptr Dev32(size_t i) { return host_dev_ + 4 * i; }
  CUdeviceptr Dev64(size_t i) { return host_dev_ + 2048 + 8 * i; }

  uint8_t* host_ = nullptr;
  CUdeviceptr host_dev_ = 0;
  CUstream s_ = nullptr;
  bool has64_ = false, has_nor_ = false;
};

TEST_F(StreamMemOpTest, WaitBlocksLaterWorkUntilTheHostWrites) {
  ASSERT_CU_OK(cuStreamWaitValue32(s_, Dev32(0), 1, CU_STREAM_WAIT_VALUE_GEQ));
  ASSERT_CU_OK(cuStreamWriteValue32(s_, Dev32(1), 7, CU_STREAM_WRITE_VALUE_DEFAULT));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 0u) << "the write ran before the wait was satisfied";
  HostStore32(Word32(0), 1);
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 7u);
}

TEST_F(StreamMemOpTest, WriteOnOneStreamReleasesAWaitOnAnother) {
  CUdeviceptr flag = 0, data = 0;
  ASSERT_CU_OK(cuMemAlloc(&flag, 64));
  ASSERT_CU_OK(cuMemAlloc(&data, 4096));
  ASSERT_CU_OK(cuMemsetD32(flag, 0, 16));
  ASSERT_CU_OK(cuMemsetD32(data, 0, 1024));
  ASSERT_CU_OK(cuCtxSynchronize());
  CUstream other;
  ASSERT_CU_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamWaitValue32(s_, flag, 42, CU_STREAM_WAIT_VALUE_EQ));
  ASSERT_CU_OK(cuMemsetD32Async(data, 0xabcd, 1024, s_));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
  ASSERT_CU_OK(cuStreamWriteValue32(other, flag, 42, 0));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  std::vector<uint32_t> out = ReadU32(data, 1024);
  EXPECT_EQ(out[0], 0xabcdu);
  EXPECT_EQ(out[1023], 0xabcdu);
  ASSERT_CU_OK(cuStreamDestroy(other));
  ASSERT_CU_OK(cuMemFree(flag));
  ASSERT_CU_OK(cuMemFree(data));
}

// One row per condition: the word's value, the operand, whether the condition
// holds at once, and a value of the word that satisfies it otherwise.
struct WaitCase {
  const char* name;
  unsigned flags;
  uint64_t word, value;
  bool holds;
  uint64_t release;
};

const WaitCase kWait32[] = {
    {"GEQ equal", CU_STREAM_WAIT_VALUE_GEQ, 5, 5, true, 0},
    {"GEQ below", CU_STREAM_WAIT_VALUE_GEQ, 4, 5, false, 6},
    {"GEQ cyclic", CU_STREAM_WAIT_VALUE_GEQ, 1, 0xfffffff0u, true, 0},
    {"GEQ cyclic below", CU_STREAM_WAIT_VALUE_GEQ, 0xfffffff0u, 1, false, 1},
    {"EQ", CU_STREAM_WAIT_VALUE_EQ, 9, 9, true, 0},
    {"EQ differs", CU_STREAM_WAIT_VALUE_EQ, 8, 9, false, 9},
    {"AND", CU_STREAM_WAIT_VALUE_AND, 0x6, 0x4, true, 0},
    {"AND disjoint", CU_STREAM_WAIT_VALUE_AND, 0x3, 0x4, false, 0x5},
    {"NOR", CU_STREAM_WAIT_VALUE_NOR, 0, 0, true, 0},
    {"NOR all ones", CU_STREAM_WAIT_VALUE_NOR, 0xffff0000u, 0x0000ffffu, false, 0},
    {"GEQ with FLUSH", CU_STREAM_WAIT_VALUE_GEQ | CU_STREAM_WAIT_VALUE_FLUSH, 3, 2, true, 0},
};

const WaitCase kWait64[] = {
    {"GEQ64 equal", CU_STREAM_WAIT_VALUE_GEQ, 1ull << 40, 1ull << 40, true, 0},
    {"GEQ64 below", CU_STREAM_WAIT_VALUE_GEQ, 1ull << 32, 1ull << 40, false, 1ull << 41},
    {"GEQ64 cyclic", CU_STREAM_WAIT_VALUE_GEQ, 1, ~0ull - 4, true, 0},
    {"EQ64 high word", CU_STREAM_WAIT_VALUE_EQ, 0x100000007ull, 7, false, 7},
    {"AND64", CU_STREAM_WAIT_VALUE_AND, 1ull << 50, 1ull << 50, true, 0},
    {"AND64 low only", CU_STREAM_WAIT_VALUE_AND, 0xffffffffull, 1ull << 50, false, 1ull << 50},
    {"NOR64", CU_STREAM_WAIT_VALUE_NOR, ~0ull << 32, 0xffffffffull, false, 0},
};

bool NeedsNor(const WaitCase& c) { return (c.flags & 0x3u) == CU_STREAM_WAIT_VALUE_NOR; }
bool NeedsFlush(const WaitCase& c) { return (c.flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0; }

TEST_F(StreamMemOpTest, WaitConditions32) {
  int flush = 0;
  ASSERT_CU_OK(cuDeviceGetAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev_));
  for (const WaitCase& c : kWait32) {
    if ((NeedsNor(c) && !has_nor_) || (NeedsFlush(c) && !flush && !IsSim())) continue;
    SCOPED_TRACE(c.name);
    HostStore32(Word32(0), static_cast<uint32_t>(c.word));
    HostStore32(Word32(1), 0);
    ASSERT_CU_OK(cuStreamWaitValue32(s_, Dev32(0), static_cast<uint32_t>(c.value), c.flags));
    ASSERT_CU_OK(cuStreamWriteValue32(s_, Dev32(1), 1, 0));
    if (c.holds) {
      EXPECT_CU_OK(QueryFor(s_, 5000));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
      EXPECT_EQ(HostLoad32(Word32(1)), 0u);
      HostStore32(Word32(0), static_cast<uint32_t>(c.release));
    }
    ASSERT_CU_OK(cuStreamSynchronize(s_));
    EXPECT_EQ(HostLoad32(Word32(1)), 1u);
  }
}

TEST_F(StreamMemOpTest, WaitConditions64) {
  if (!has64_) GTEST_SKIP() << "no 64-bit stream memory operations on this device";
  for (const WaitCase& c : kWait64) {
    if (NeedsNor(c) && !has_nor_) continue;
    SCOPED_TRACE(c.name);
    HostStore64(Word64(0), c.word);
    HostStore32(Word32(1), 0);
    ASSERT_CU_OK(cuStreamWaitValue64(s_, Dev64(0), c.value, c.flags));
    ASSERT_CU_OK(cuStreamWriteValue32(s_, Dev32(1), 1, 0));
    if (c.holds) {
      EXPECT_CU_OK(QueryFor(s_, 5000));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
      HostStore64(Word64(0), c.release);
    }
    ASSERT_CU_OK(cuStreamSynchronize(s_));
    EXPECT_EQ(HostLoad32(Word32(1)), 1u);
  }
}

TEST_F(StreamMemOpTest, WritesLandInStreamOrder) {
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, 64));
  ASSERT_CU_OK(cuMemsetD32Async(d, 0, 16, s_));
  ASSERT_CU_OK(cuStreamWriteValue32(s_, d, 0x11111111u, 0));
  ASSERT_CU_OK(cuStreamWriteValue32(s_, d + 4, 0x22222222u, 0));
  if (has64_) {
    ASSERT_CU_OK(cuStreamWriteValue64(s_, d + 8, 0x0123456789abcdefull, 0));
  }
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  uint32_t out[4] = {};
  ASSERT_CU_OK(cuMemcpyDtoH(out, d, sizeof out));
  EXPECT_EQ(out[0], 0x11111111u);
  EXPECT_EQ(out[1], 0x22222222u);
  if (has64_) {
    uint64_t v = 0;
    std::memcpy(&v, &out[2], 8);
    EXPECT_EQ(v, 0x0123456789abcdefull);
  }
  ASSERT_CU_OK(cuMemFree(d));
}

TEST_F(StreamMemOpTest, BatchRunsItsOperationsInOrder) {
  CUstreamBatchMemOpParams ops[3];
  std::memset(ops, 0, sizeof ops);
  ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[0].waitValue.address = Dev32(0);
  ops[0].waitValue.value = 3;
  ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[1].writeValue.address = Dev32(1);
  ops[1].writeValue.value = 0x5a5a;
  ops[2].writeValue.operation = has64_ ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[2].writeValue.address = has64_ ? Dev64(0) : Dev32(2);
  if (has64_) {
    ops[2].writeValue.value64 = 0xfedcba9876543210ull;
  } else {
    ops[2].writeValue.value = 0x7777;
  }
  ASSERT_CU_OK(cuStreamBatchMemOp(s_, 3, ops, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 0u);
  HostStore32(Word32(0), 3);
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(1)), 0x5a5au);
  if (has64_) {
    EXPECT_EQ(__atomic_load_n(const_cast<uint64_t*>(Word64(0)), __ATOMIC_SEQ_CST), 0xfedcba9876543210ull);
  } else {
    EXPECT_EQ(HostLoad32(Word32(2)), 0x7777u);
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s_, 1, ops, 1)) << "flags must be 0";
}

using SimStreamMemOpTest = StreamMemOpTest;

TEST_F(SimStreamMemOpTest, AttributesAndArgumentChecks) {
  SKIP_UNLESS_SIM();
  for (CUdevice_attribute a :
       {CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1,
        CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
        CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR}) {
    int v = 0;
    ASSERT_CU_OK(cuDeviceGetAttribute(&v, a, dev_));
    EXPECT_EQ(v, 1) << "attribute " << a;
  }
  // Misaligned, unknown, managed and null words; bad flags.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue32(s_, Dev32(0) + 2, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue64(s_, Dev32(1), 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s_, 0, 0, 0));
  uint32_t pageable = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s_, reinterpret_cast<CUdeviceptr>(&pageable), 1, 0));
  CUdeviceptr managed = 0;
  ASSERT_CU_OK(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s_, managed, 1, 0));
  ASSERT_CU_OK(cuMemFree(managed));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue32(s_, Dev32(0), 0, 0x10));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s_, Dev32(0), 0, 0x10));
  // A batch is checked whole before anything is queued.
  CUstreamBatchMemOpParams ops[2];
  std::memset(ops, 0, sizeof ops);
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = Dev32(5);
  ops[0].writeValue.value = 9;
  ops[1].operation = static_cast<CUstreamBatchMemOpType>(99);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s_, 2, ops, 0));
  ops[1].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  ops[1].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(5)), 0u);
  std::vector<CUstreamBatchMemOpParams> many(256, ops[0]);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s_, 256, many.data(), 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s_, 1, nullptr, 0));
  ASSERT_CU_OK(cuStreamBatchMemOp(s_, 2, ops, 0));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(5)), 9u);
  // Through the per-thread default stream too.
  ASSERT_CU_OK(cuStreamWriteValue32(CU_STREAM_PER_THREAD, Dev32(6), 6, 0));
  ASSERT_CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_EQ(HostLoad32(Word32(6)), 6u);
}

TEST_F(SimStreamMemOpTest, CapturedWritesReplayWithTheGraph) {
  SKIP_UNLESS_SIM();
  ASSERT_CU_OK(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(cuStreamWriteValue32(s_, Dev32(3), 33, 0));
  CUgraph g = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(s_, &g));
  EXPECT_EQ(HostLoad32(Word32(3)), 0u) << "a captured write must not run";
  CUgraphNode node = nullptr;
  size_t n = 1;
  ASSERT_CU_OK(cuGraphGetNodes(g, &node, &n));
  ASSERT_EQ(n, 1u);
  CUgraphNodeType type;
  ASSERT_CU_OK(cuGraphNodeGetType(node, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g, 0));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(HostLoad32(Word32(3)), 33u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuGraphDestroy(g));
}

// ---- cuPointerSetAttribute --------------------------------------------------

class PointerSetAttributeTest : public KernelTest {};

TEST_F(PointerSetAttributeTest, SyncMemopsIsSetAndReadBack) {
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 1 << 20));
  unsigned one = 1, zero = 0;
  ASSERT_CU_OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  int v = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  EXPECT_EQ(v, 1);
  v = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 4096)) << "interior pointer";
  EXPECT_EQ(v, 1);
  ASSERT_CU_OK(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  ASSERT_CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  EXPECT_EQ(v, 0);
  // Only SYNC_MEMOPS can be set.
  CUcontext c = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuPointerSetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  int ordinal = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuPointerSetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  ASSERT_CU_OK(cuMemFree(p));
}

using SimPointerSetAttributeTest = PointerSetAttributeTest;

TEST_F(SimPointerSetAttributeTest, UnknownPointerAndSynchronousMemset) {
  SKIP_UNLESS_SIM();
  unsigned one = 1;
  int local = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, reinterpret_cast<CUdeviceptr>(&local)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuPointerSetAttribute(nullptr, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 0));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 4096));
  int v = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  EXPECT_EQ(v, 0) << "unset until cuPointerSetAttribute";
  // A synchronous memset of device memory returns before it ran, unless the
  // region has SYNC_MEMOPS.
  ASSERT_CU_OK(Sleep(nullptr, 100 * kMs));
  ASSERT_CU_OK(cuMemsetD32(p, 1, 1024));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(nullptr));
  ASSERT_CU_OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  EXPECT_CU_OK(cuStreamQuery(nullptr)) << "setting it waits for pending work on the region";
  ASSERT_CU_OK(Sleep(nullptr, 50 * kMs));
  ASSERT_CU_OK(cuMemsetD32(p, 2, 1024));
  EXPECT_CU_OK(cuStreamQuery(nullptr));
  EXPECT_EQ(ReadU32(p, 1024)[1023], 2u);
  ASSERT_CU_OK(cuMemFree(p));
}

// ---- Stream attributes and cuStreamGetDevice -------------------------------

class StreamAttributeTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuStreamCreate(&a_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuStreamCreate(&b_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemAlloc(&buf_, 1 << 20));
  }
  void TearDown() override {
    if (a_ != nullptr) cuStreamDestroy(a_);
    if (b_ != nullptr) cuStreamDestroy(b_);
    if (buf_ != 0) cuMemFree(buf_);
    ContextTest::TearDown();
  }
  CUstreamAttrValue Window() {
    CUstreamAttrValue v;
    std::memset(&v, 0, sizeof v);
    int max_window = 0;
    cuDeviceGetAttribute(&max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev_);
    v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(buf_);
    v.accessPolicyWindow.num_bytes = std::min<size_t>(1 << 20, static_cast<size_t>(max_window));
    v.accessPolicyWindow.hitRatio = 0.5f;
    v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    return v;
  }
  CUstream a_ = nullptr, b_ = nullptr;
  CUdeviceptr buf_ = 0;
};

TEST_F(StreamAttributeTest, SetAndGetAccessPolicyWindowAndSyncPolicy) {
  CUstreamAttrValue in = Window();
  ASSERT_CU_OK(cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &in));
  CUstreamAttrValue out;
  std::memset(&out, 0, sizeof out);
  ASSERT_CU_OK(cuStreamGetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &out));
  EXPECT_EQ(out.accessPolicyWindow.num_bytes, in.accessPolicyWindow.num_bytes);
  EXPECT_FLOAT_EQ(out.accessPolicyWindow.hitRatio, 0.5f);
  EXPECT_EQ(out.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
  EXPECT_EQ(out.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);

  in.syncPolicy = CU_SYNC_POLICY_BLOCKING_SYNC;
  ASSERT_CU_OK(cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &in));
  ASSERT_CU_OK(cuStreamGetAttribute(a_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &out));
  EXPECT_EQ(out.syncPolicy, CU_SYNC_POLICY_BLOCKING_SYNC);
  // The stream still works.
  ASSERT_CU_OK(cuMemsetD32Async(buf_, 5, 16, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
}

TEST_F(StreamAttributeTest, PriorityReadsAsTheStreamsPriority) {
  int least = 0, greatest = 0;
  ASSERT_CU_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream s;
  ASSERT_CU_OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest));
  CUstreamAttrValue out;
  std::memset(&out, 0, sizeof out);
  ASSERT_CU_OK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &out));
  EXPECT_EQ(out.priority, greatest);
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(StreamAttributeTest, CopyAttributes) {
  CUstreamAttrValue in = Window();
  ASSERT_CU_OK(cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &in));
  in.syncPolicy = CU_SYNC_POLICY_YIELD;
  ASSERT_CU_OK(cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &in));
  ASSERT_CU_OK(cuStreamCopyAttributes(b_, a_));
  CUstreamAttrValue out;
  std::memset(&out, 0, sizeof out);
  ASSERT_CU_OK(cuStreamGetAttribute(b_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &out));
  EXPECT_EQ(out.accessPolicyWindow.num_bytes, in.accessPolicyWindow.num_bytes);
  EXPECT_EQ(out.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
  ASSERT_CU_OK(cuStreamGetAttribute(b_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &out));
  EXPECT_EQ(out.syncPolicy, CU_SYNC_POLICY_YIELD);
}

TEST_F(StreamAttributeTest, GetDevice) {
  CUdevice d = -1;
  ASSERT_CU_OK(cuStreamGetDevice(a_, &d));
  EXPECT_EQ(d, dev_);
  d = -1;
  ASSERT_CU_OK(cuStreamGetDevice(nullptr, &d)) << "the legacy default stream";
  EXPECT_EQ(d, dev_);
  d = -1;
  ASSERT_CU_OK(cuStreamGetDevice(CU_STREAM_PER_THREAD, &d));
  EXPECT_EQ(d, dev_);
}

using SimStreamAttributeTest = StreamAttributeTest;

TEST_F(SimStreamAttributeTest, ValidationAndPriority) {
  SKIP_UNLESS_SIM();
  CUstreamAttrValue v = Window();
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_PERSISTING;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  v = Window();
  v.accessPolicyWindow.hitRatio = 1.5f;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  v = Window();
  v.accessPolicyWindow.num_bytes = size_t{1} << 40;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  v.syncPolicy = static_cast<CUsynchronizationPolicy>(9);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamGetAttribute(a_, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamGetAttribute(a_, CU_STREAM_ATTRIBUTE_PRIORITY, nullptr));
  // Defaults of a new stream.
  ASSERT_CU_OK(cuStreamGetAttribute(b_, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
  EXPECT_EQ(v.syncPolicy, CU_SYNC_POLICY_AUTO);
  ASSERT_CU_OK(cuStreamGetAttribute(b_, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  EXPECT_EQ(v.accessPolicyWindow.num_bytes, 0u);
  // Priority is settable and clamped to the device's range.
  v.priority = -100;
  ASSERT_CU_OK(cuStreamSetAttribute(a_, CU_STREAM_ATTRIBUTE_PRIORITY, &v));
  int prio = 0;
  ASSERT_CU_OK(cuStreamGetPriority(a_, &prio));
  EXPECT_EQ(prio, -5);
  // Streams of different contexts.
  CUcontext other = nullptr;
  ASSERT_CU_OK(cuCtxCreate(&other, nullptr, 0, dev_));
  CUstream foreign = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&foreign, CU_STREAM_NON_BLOCKING));
  CUdevice d = -1;
  ASSERT_CU_OK(cuStreamGetDevice(foreign, &d));
  EXPECT_EQ(d, dev_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamCopyAttributes(a_, foreign));
  ASSERT_CU_OK(cuStreamDestroy(foreign));
  ASSERT_CU_OK(cuCtxDestroy(other));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamGetDevice(a_, nullptr));
}

// ---- Memory-pool reservation ----------------------------------------------

class PoolReservationTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev_;
    ASSERT_CU_OK(cuMemPoolCreate(&pool_, &props));
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      cuStreamDestroy(s_);
    }
    if (pool_ != nullptr) cuMemPoolDestroy(pool_);
    ContextTest::TearDown();
  }
  cuuint64_t Attr(CUmemPool_attribute a) {
    cuuint64_t v = 0;
    EXPECT_CU_OK(cuMemPoolGetAttribute(pool_, a, &v));
    return v;
  }
  CUmemoryPool pool_ = nullptr;
  CUstream s_ = nullptr;
  static constexpr size_t kBytes = size_t{8} << 20;
};

TEST_F(PoolReservationTest, MaxThresholdKeepsFreedMemoryReserved) {
  cuuint64_t max = UINT64_MAX;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), kBytes);
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kBytes);
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kBytes) << "freed memory stays in the pool";
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), kBytes);
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH), kBytes);
  // Allocating again reuses the reservation rather than growing it.
  cuuint64_t reserved = Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), reserved);
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), kBytes);
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  // Trimming releases what is not in use.
  ASSERT_CU_OK(cuMemPoolTrimTo(pool_, 0));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
}

TEST_F(PoolReservationTest, TrimToNeverReleasesMemoryInUse) {
  cuuint64_t max = UINT64_MAX;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&a, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&b, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemFreeAsync(a, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemPoolTrimTo(pool_, 0));
  cuuint64_t used = Attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  EXPECT_GE(used, kBytes);
  EXPECT_GE(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), used);
  ASSERT_CU_OK(cuMemsetD8Async(b, 1, kBytes, s_));
  ASSERT_CU_OK(cuMemFreeAsync(b, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemPoolTrimTo(pool_, 0));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
}

using SimPoolReservationTest = PoolReservationTest;

TEST_F(SimPoolReservationTest, ReservedMemoryIsChargedToTheDevice) {
  SKIP_UNLESS_SIM();
  size_t free0 = 0, free1 = 0, total = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  cuuint64_t max = UINT64_MAX;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, kBytes) << "the pool holds the freed bytes";
  // Reuse moves the charge, it does not add one.
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, kBytes);
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  // A threshold keeps at most that much; lowering it releases the excess.
  cuuint64_t half = kBytes / 2;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &half));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), half);
  ASSERT_CU_OK(cuMemPoolTrimTo(pool_, kBytes / 4));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kBytes / 4);
  ASSERT_CU_OK(cuMemPoolTrimTo(pool_, 0));
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
  // Threshold 0 (the default): nothing is kept.
  cuuint64_t zero = 0;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  // Resetting the high-water marks sets them to the current values.
  zero = 0;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
  EXPECT_EQ(Attr(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0u);
  // Destroying a pool gives back what it kept.
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool_, s_));
  ASSERT_CU_OK(cuMemFreeAsync(p, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  ASSERT_CU_OK(cuMemPoolDestroy(pool_));
  pool_ = nullptr;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
}

}  // namespace
}  // namespace vgpu::conformance

namespace vgpu::conformance {
namespace {

// ---- Managed memory: advice, prefetch and range attributes -----------------

class ManagedRangeTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuMemAllocManaged(&p_, kBytes, CU_MEM_ATTACH_GLOBAL));
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      cuStreamDestroy(s_);
    }
    if (p_ != 0) cuMemFree(p_);
    ContextTest::TearDown();
  }
  int Int(CUmem_range_attribute a, CUdeviceptr p, size_t n) {
    int v = 12345;
    EXPECT_CU_OK(cuMemRangeGetAttribute(&v, 4, a, p, n));
    return v;
  }
  static CUmemLocation Device(int id) { return {CU_MEM_LOCATION_TYPE_DEVICE, id}; }
  static CUmemLocation Host() { return {CU_MEM_LOCATION_TYPE_HOST, 0}; }
  static constexpr size_t kPage = 64 << 10;  // a multiple of any CPU page size
  static constexpr size_t kBytes = 16 * kPage;
  CUdeviceptr p_ = 0;
  CUstream s_ = nullptr;
};

TEST_F(ManagedRangeTest, ReadMostly) {
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, kBytes), 0);
  ASSERT_CU_OK(cuMemAdvise(p_, 4 * kPage, CU_MEM_ADVISE_SET_READ_MOSTLY, Device(dev_)));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, 4 * kPage), 1);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_ + kPage, kPage), 1);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, kBytes), 0) << "not every page";
  ASSERT_CU_OK(cuMemAdvise(p_ + kPage, kPage, CU_MEM_ADVISE_UNSET_READ_MOSTLY, Device(dev_)));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, 4 * kPage), 0);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_ + 2 * kPage, 2 * kPage), 1);
}

TEST_F(ManagedRangeTest, PreferredLocation) {
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p_, kBytes), CU_DEVICE_INVALID);
  ASSERT_CU_OK(cuMemAdvise(p_, kBytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Device(dev_)));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p_, kBytes), dev_);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p_, kBytes), CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p_, kBytes), dev_);
  ASSERT_CU_OK(cuMemAdvise(p_, 2 * kPage, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Host()));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p_, 2 * kPage), CU_DEVICE_CPU);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p_, 2 * kPage), CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p_, kBytes), CU_DEVICE_INVALID) << "mixed";
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p_, kBytes), CU_MEM_LOCATION_TYPE_INVALID);
  ASSERT_CU_OK(cuMemAdvise(p_, kBytes, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Host()));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p_, kBytes), CU_DEVICE_INVALID);
}

TEST_F(ManagedRangeTest, AccessedBy) {
  int ids[3] = {7, 7, 7};
  ASSERT_CU_OK(cuMemRangeGetAttribute(ids, sizeof ids, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_, kBytes));
  EXPECT_EQ(ids[0], CU_DEVICE_INVALID);
  ASSERT_CU_OK(cuMemAdvise(p_, kBytes, CU_MEM_ADVISE_SET_ACCESSED_BY, Device(dev_)));
  ASSERT_CU_OK(cuMemRangeGetAttribute(ids, sizeof ids, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_, kBytes));
  EXPECT_EQ(ids[0], dev_);
  EXPECT_EQ(ids[1], CU_DEVICE_INVALID);
  EXPECT_EQ(ids[2], CU_DEVICE_INVALID);
  ASSERT_CU_OK(cuMemAdvise(p_, kPage, CU_MEM_ADVISE_UNSET_ACCESSED_BY, Device(dev_)));
  ASSERT_CU_OK(cuMemRangeGetAttribute(ids, sizeof ids, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_, kBytes));
  EXPECT_EQ(ids[0], CU_DEVICE_INVALID) << "not set for the entire range any more";
  ASSERT_CU_OK(cuMemRangeGetAttribute(ids, 4, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_ + kPage, kPage));
  EXPECT_EQ(ids[0], dev_);
}

TEST_F(ManagedRangeTest, PrefetchIsOrderedAndRecorded) {
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_, kBytes), CU_DEVICE_INVALID);
  auto* host = reinterpret_cast<uint32_t*>(p_);
  for (size_t i = 0; i < kBytes / 4; ++i) host[i] = static_cast<uint32_t>(i);
  ASSERT_CU_OK(cuMemPrefetchAsync(p_, kBytes, Device(dev_), 0, s_));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_, kBytes), dev_);
  ASSERT_CU_OK(cuMemsetD32Async(p_, 0xaa, 16, s_));
  ASSERT_CU_OK(cuMemPrefetchAsync(p_, kPage, Host(), 0, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(host[0], 0xaau);
  EXPECT_EQ(host[kBytes / 4 - 1], kBytes / 4 - 1);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_, kPage), CU_DEVICE_CPU);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p_, kPage), CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_ + kPage, kPage), dev_);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, p_ + kPage, kPage), dev_);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_, kBytes), CU_DEVICE_INVALID) << "mixed";
  // The default streams too.
  ASSERT_CU_OK(cuMemPrefetchAsync(p_, kBytes, Device(dev_), 0, nullptr));
  ASSERT_CU_OK(cuStreamSynchronize(nullptr));
}

TEST_F(ManagedRangeTest, GetAttributesAtOnce) {
  ASSERT_CU_OK(cuMemAdvise(p_, kBytes, CU_MEM_ADVISE_SET_READ_MOSTLY, Device(dev_)));
  ASSERT_CU_OK(cuMemAdvise(p_, kBytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Device(dev_)));
  ASSERT_CU_OK(cuMemPrefetchAsync(p_, kBytes, Device(dev_), 0, s_));
  int read_mostly = -1, preferred = -1, last = -1;
  void* data[] = {&read_mostly, &preferred, &last};
  size_t sizes[] = {4, 4, 4};
  CUmem_range_attribute attrs[] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                   CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION};
  ASSERT_CU_OK(cuMemRangeGetAttributes(data, sizes, attrs, 3, p_, kBytes));
  EXPECT_EQ(read_mostly, 1);
  EXPECT_EQ(preferred, dev_);
  EXPECT_EQ(last, dev_);
}

using SimManagedRangeTest = ManagedRangeTest;

TEST_F(SimManagedRangeTest, ArgumentChecksAndLegacyEntryPoints) {
  SKIP_UNLESS_SIM();
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, kPage));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(d, kPage, Device(dev_), 0, s_)) << "not managed";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAdvise(d, kPage, CU_MEM_ADVISE_SET_READ_MOSTLY, Device(dev_)));
  int v = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, kPage));
  ASSERT_CU_OK(cuMemFree(d));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuMemPrefetchAsync(p_, kPage, Device(99), 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(p_, kPage, Device(dev_), 1, s_)) << "flags";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(p_, kBytes + 1, Device(dev_), 0, s_)) << "past the end";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(p_, 0, Device(dev_), 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAdvise(p_, kPage, static_cast<CUmem_advise>(42), Device(dev_)));
  CUmemLocation numa{CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAdvise(p_, kPage, CU_MEM_ADVISE_SET_ACCESSED_BY, numa));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, kPage));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttribute(&v, 6, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_, kPage));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttribute(&v, 4, static_cast<CUmem_range_attribute>(77), p_, kPage));
  // Ranges are rounded out to whole CPU pages.
  ASSERT_CU_OK(cuMemAdvise(p_ + 100, 10, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, 4096), 1);
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_ + 4096, 4096), 0);
  // The CUDA 8-12.1 entry points take a device ordinal or CU_DEVICE_CPU.
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_CU_OK(cuGetProcAddress("cuMemPrefetchAsync", &fn, 12000, 0, &st));
  auto prefetch1 = reinterpret_cast<CUresult(CUDAAPI*)(CUdeviceptr, size_t, CUdevice, CUstream)>(fn);
  ASSERT_CU_OK(prefetch1(p_, kBytes, CU_DEVICE_CPU, s_));
  EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p_, kBytes), CU_DEVICE_CPU);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, prefetch1(p_, kBytes, 42, s_));
  ASSERT_CU_OK(cuGetProcAddress("cuMemAdvise", &fn, 12000, 0, &st));
  auto advise1 = reinterpret_cast<CUresult(CUDAAPI*)(CUdeviceptr, size_t, CUmem_advise, CUdevice)>(fn);
  ASSERT_CU_OK(advise1(p_, kBytes, CU_MEM_ADVISE_SET_ACCESSED_BY, CU_DEVICE_CPU));
  int ids[2] = {};
  ASSERT_CU_OK(cuMemRangeGetAttribute(ids, sizeof ids, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p_, kBytes));
  EXPECT_EQ(ids[0], CU_DEVICE_CPU);
  EXPECT_EQ(ids[1], CU_DEVICE_INVALID);
  // A freed range forgets its advice: a new allocation at the same address starts clean.
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  CUdeviceptr old = p_;
  ASSERT_CU_OK(cuMemFree(p_));
  p_ = 0;
  ASSERT_CU_OK(cuMemAllocManaged(&p_, kBytes, CU_MEM_ATTACH_GLOBAL));
  if (p_ == old) {
    EXPECT_EQ(Int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p_, 4096), 0);
  }
}

}  // namespace
}  // namespace vgpu::conformance

namespace vgpu::conformance {
namespace {

// ---- cuGraphInstantiateWithParams and cuGraphExecUpdate ----------------------

class GraphUpdateTest : public KernelTest {
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
  }
  void TearDown() override {
    for (CUgraph g : graphs_) cuGraphDestroy(g);
    if (s_ != nullptr) {
      cuStreamSynchronize(s_);
      cuStreamDestroy(s_);
      cuMemFree(a_);
      cuMemFree(b_);
    }
    KernelTest::TearDown();
  }
  CUgraph NewGraph() {
    CUgraph g = nullptr;
    EXPECT_CU_OK(cuGraphCreate(&g, 0));
    graphs_.push_back(g);
    return g;
  }
  // memset(dst, set) -> fill(dst, fill): the shape every graph of these tests has.
  CUresult Build(CUgraph g, CUdeviceptr dst, uint32_t set, uint32_t fill, CUgraphNode* nodes) {
    CUDA_MEMSET_NODE_PARAMS m{};
    m.dst = dst;
    m.elementSize = 4;
    m.width = kCount;
    m.height = 1;
    m.value = set;
    if (CUresult r = cuGraphAddMemsetNode(&nodes[0], g, nullptr, 0, &m, ctx_); r != CUDA_SUCCESS) return r;
    return AddFill(g, &nodes[0], 1, dst, fill, &nodes[1]);
  }
  CUresult AddFill(CUgraph g, const CUgraphNode* deps, size_t n, CUdeviceptr dst, uint32_t value, CUgraphNode* out) {
    fill_args_.push_back({dst, value, kCount});
    FillArgs& f = fill_args_.back();
    void* params[] = {&f.p, &f.value, &f.count};
    CUDA_KERNEL_NODE_PARAMS k{};
    k.func = fill_;
    k.gridDimX = kCount / 256;
    k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 256;
    k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = params;
    return cuGraphAddKernelNode(out, g, deps, n, &k);
  }
  struct FillArgs {
    CUdeviceptr p;
    uint32_t value;
    uint64_t count;
  };
  static constexpr size_t kCount = 4096;
  std::deque<FillArgs> fill_args_;
  std::vector<CUgraph> graphs_;
  CUstream s_ = nullptr;
  CUdeviceptr a_ = 0, b_ = 0;
};

TEST_F(GraphUpdateTest, InstantiateWithParams) {
  CUgraph g = NewGraph();
  CUgraphNode nodes[2];
  ASSERT_CU_OK(Build(g, a_, 1, 5, nodes));
  CUDA_GRAPH_INSTANTIATE_PARAMS p{};
  p.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  p.hUploadStream = s_;
  p.hErrNode_out = nodes[0];
  p.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiateWithParams(&e, g, &p));
  EXPECT_EQ(p.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  EXPECT_EQ(p.hErrNode_out, nullptr);
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, kCount)[kCount - 1], 5u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  p = {};
  ASSERT_CU_OK(cuGraphInstantiateWithParams(&e, g, &p));
  EXPECT_EQ(p.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphUpdateTest, UpdateKernelAndMemsetParameters) {
  CUgraph g1 = NewGraph(), g2 = NewGraph();
  CUgraphNode n1[2], n2[2];
  ASSERT_CU_OK(Build(g1, a_, 1, 5, n1));
  ASSERT_CU_OK(Build(g2, b_, 2, 9, n2));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphExecUpdateResultInfo info;
  std::memset(&info, 0xff, sizeof info);
  ASSERT_CU_OK(cuGraphExecUpdate(e, g2, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(b_, kCount)[kCount - 1], 9u) << "the updated kernel node's arguments";
  EXPECT_EQ(ReadU32(a_, kCount)[0], 0u) << "the original target is untouched";
  // The update does not tie the exec graph to g2: changing g2 later changes nothing.
  ASSERT_CU_OK(cuGraphExecUpdate(e, g1, &info));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, kCount)[kCount - 1], 5u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphUpdateTest, UpdateMemcpyNode) {
  CUgraph g1 = NewGraph(), g2 = NewGraph();
  void* pinned = nullptr;
  ASSERT_CU_OK(cuMemAllocHost(&pinned, kCount * 4));
  auto* host = static_cast<uint32_t*>(pinned);
  host[kCount - 1] = 0;
  ASSERT_CU_OK(cuMemsetD32(a_, 3, kCount));
  ASSERT_CU_OK(cuMemsetD32(b_, 4, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  auto add_copy = [&](CUgraph g, CUdeviceptr src, CUgraphNode* out) {
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host;
    c.WidthInBytes = kCount * 4;
    c.Height = 1;
    c.Depth = 1;
    return cuGraphAddMemcpyNode(out, g, nullptr, 0, &c, ctx_);
  };
  CUgraphNode n1, n2;
  ASSERT_CU_OK(add_copy(g1, a_, &n1));
  ASSERT_CU_OK(add_copy(g2, b_, &n2));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphExecUpdateResultInfo info{};
  ASSERT_CU_OK(cuGraphExecUpdate(e, g2, &info));
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(host[kCount - 1], 4u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  ASSERT_CU_OK(cuMemFreeHost(pinned));
}

TEST_F(GraphUpdateTest, TopologyChangesAreRefused) {
  CUgraph g1 = NewGraph(), bigger = NewGraph(), unlinked = NewGraph();
  CUgraphNode n1[2], nb[3], nu[2];
  ASSERT_CU_OK(Build(g1, a_, 1, 5, n1));
  ASSERT_CU_OK(Build(bigger, a_, 1, 6, nb));
  ASSERT_CU_OK(cuGraphAddEmptyNode(&nb[2], bigger, &nb[1], 1));
  CUDA_MEMSET_NODE_PARAMS m{};
  m.dst = a_;
  m.elementSize = 4;
  m.width = kCount;
  m.height = 1;
  m.value = 2;
  ASSERT_CU_OK(cuGraphAddMemsetNode(&nu[0], unlinked, nullptr, 0, &m, ctx_));
  ASSERT_CU_OK(AddFill(unlinked, nullptr, 0, a_, 7, &nu[1]));  // no edge
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphExecUpdateResultInfo info{};
  EXPECT_CU(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, bigger, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  EXPECT_EQ(info.errorNode, nullptr) << "node counts differ";
  EXPECT_CU(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, unlinked, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  // Nothing was changed by the refused updates.
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, kCount)[kCount - 1], 5u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphUpdateTest, NodeTypeChangeIsRefused) {
  CUgraph g1 = NewGraph(), g2 = NewGraph();
  CUgraphNode k, empty;
  ASSERT_CU_OK(AddFill(g1, nullptr, 0, a_, 5, &k));
  ASSERT_CU_OK(cuGraphAddEmptyNode(&empty, g2, nullptr, 0));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphExecUpdateResultInfo info{};
  EXPECT_CU(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, g2, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  EXPECT_EQ(info.errorNode, empty);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

TEST_F(GraphUpdateTest, CudaElevenUpdateThroughGetProcAddress) {
  using Update4 = CUresult(CUDAAPI*)(CUgraphExec, CUgraph, CUgraphNode*, CUgraphExecUpdateResult*);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_CU_OK(cuGetProcAddress("cuGraphExecUpdate", &fn, 11000, 0, &st));
  ASSERT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
  CUgraph g1 = NewGraph(), g2 = NewGraph();
  CUgraphNode n1[2], n2[2];
  ASSERT_CU_OK(Build(g1, a_, 1, 5, n1));
  ASSERT_CU_OK(Build(g2, a_, 1, 8, n2));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphNode err = n1[0];
  CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_ERROR;
  ASSERT_CU_OK(reinterpret_cast<Update4>(fn)(e, g2, &err, &result));
  EXPECT_EQ(result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  EXPECT_EQ(err, nullptr);
  ASSERT_CU_OK(cuGraphLaunch(e, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(ReadU32(a_, kCount)[kCount - 1], 8u);
  ASSERT_CU_OK(cuGraphExecDestroy(e));
}

using SimGraphUpdateTest = GraphUpdateTest;

TEST_F(SimGraphUpdateTest, ParameterLimitsAndDeviceLaunchChecks) {
  SKIP_UNLESS_SIM();
  // A 2D memset may change only its address and value.
  auto memset2d = [&](CUgraph g, size_t width, CUgraphNode* out) {
    CUDA_MEMSET_NODE_PARAMS m{};
    m.dst = a_;
    m.elementSize = 4;
    m.width = width;
    m.height = 4;
    m.pitch = 1024;
    m.value = 1;
    return cuGraphAddMemsetNode(out, g, nullptr, 0, &m, ctx_);
  };
  CUgraph g1 = NewGraph(), g2 = NewGraph();
  CUgraphNode n1, n2;
  ASSERT_CU_OK(memset2d(g1, 16, &n1));
  ASSERT_CU_OK(memset2d(g2, 32, &n2));
  CUgraphExec e = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&e, g1, 0));
  CUgraphExecUpdateResultInfo info{};
  EXPECT_CU(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, g2, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
  EXPECT_EQ(info.errorNode, n2);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExecUpdate(e, g2, nullptr));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  // Device launch: only kernel, memcpy and memset nodes.
  CUgraph g3 = NewGraph();
  CUgraphNode empty;
  ASSERT_CU_OK(cuGraphAddEmptyNode(&empty, g3, nullptr, 0));
  CUDA_GRAPH_INSTANTIATE_PARAMS p{};
  p.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&e, g3, &p));
  EXPECT_EQ(p.result_out, CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED);
  EXPECT_EQ(p.hErrNode_out, empty);
  p = {};
  p.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&e, g1, &p));
  EXPECT_EQ(p.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&e, g1, nullptr));
  p = {};
  p.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  ASSERT_CU_OK(cuGraphInstantiateWithParams(&e, g1, &p));
  ASSERT_CU_OK(cuGraphExecDestroy(e));
  // "cuGraphInstantiate" at 11000-12xxx is the 5-argument _v2, not a stub.
  using Instantiate5 = CUresult(CUDAAPI*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
  for (int version : {11000, 11040, 12000, 12080, 13000}) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st;
    ASSERT_CU_OK(cuGetProcAddress("cuGraphInstantiate", &fn, version, 0, &st)) << version;
    char log[16] = "x";
    CUgraphNode err = n1;
    ASSERT_CU_OK(reinterpret_cast<Instantiate5>(fn)(&e, g1, &err, log, sizeof log)) << version;
    EXPECT_EQ(err, nullptr);
    EXPECT_EQ(log[0], '\0');
    ASSERT_CU_OK(cuGraphExecDestroy(e));
  }
}

}  // namespace
}  // namespace vgpu::conformance
