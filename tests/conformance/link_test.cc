// The JIT linker (cuLinkCreate/AddData/AddFile/Complete/Destroy): issue 16's
// entry points that were NOT_SUPPORTED stubs. The portable suite links PTX
// built by nvcc, which every driver accepts; SimLinkTest holds the
// simulator's own answers (what the output image is, inputs it does not read).
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

// A second, independent input: a kernel that does nothing.
constexpr char kNopPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry link_nop()\n{\n  ret;\n}\n";

class LinkTest : public KernelTest {
 protected:
  void TearDown() override {
    if (link_ != nullptr) cuLinkDestroy(link_);
    if (linked_ != nullptr) cuModuleUnload(linked_);
    KernelTest::TearDown();
  }
  void CreateWithLogs() {
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    values_[0] = info_;
    values_[1] = reinterpret_cast<void*>(sizeof info_);
    values_[2] = error_;
    values_[3] = reinterpret_cast<void*>(sizeof error_);
    ASSERT_CU_OK(cuLinkCreate(4, opts, values_, &link_));
  }
  // Completes the link, loads the image and fills 256 words through it.
  void CompleteAndRun() {
    void* image = nullptr;
    size_t size = 0;
    ASSERT_CU_OK(cuLinkComplete(link_, &image, &size));
    ASSERT_NE(image, nullptr);
    EXPECT_GT(size, 0u);
    ASSERT_CU_OK(cuModuleLoadData(&linked_, image));
    CUfunction fill = nullptr;
    ASSERT_CU_OK(cuModuleGetFunction(&fill, linked_, "conf_fill_u32"));
    CUdeviceptr d = 0;
    ASSERT_CU_OK(cuMemAlloc(&d, 1024));
    ASSERT_CU_OK(LaunchArrayKernel(fill, nullptr, d, 0x5eed, 256));
    std::vector<uint32_t> out(256);
    ASSERT_CU_OK(cuMemcpyDtoH(out.data(), d, 1024));
    EXPECT_EQ(out[0], 0x5eedu);
    EXPECT_EQ(out[255], 0x5eedu);
    EXPECT_CU_OK(cuMemFree(d));
  }
  CUlinkState link_ = nullptr;
  CUmodule linked_ = nullptr;
  char info_[1024] = {};
  char error_[1024] = {};
  void* values_[4] = {};
};

TEST_F(LinkTest, LinksPtxFileIntoALoadableImage) {
  ASSERT_NO_FATAL_FAILURE(CreateWithLogs());
  ASSERT_CU_OK(cuLinkAddFile(link_, CU_JIT_INPUT_PTX, CONF_PTX_PATH, 0, nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(CompleteAndRun());
}

TEST_F(LinkTest, LinksTwoPtxInputsIntoOneModule) {
  ASSERT_NO_FATAL_FAILURE(CreateWithLogs());
  std::vector<uint8_t> ptx = ReadFile(CONF_PTX_PATH);
  ASSERT_FALSE(ptx.empty());
  ptx.push_back(0);
  ASSERT_CU_OK(cuLinkAddData(link_, CU_JIT_INPUT_PTX, ptx.data(), ptx.size(), "kernels", 0, nullptr,
                             nullptr));
  ASSERT_CU_OK(cuLinkAddData(link_, CU_JIT_INPUT_PTX, const_cast<char*>(kNopPtx), sizeof kNopPtx,
                             "nop", 0, nullptr, nullptr));
  ASSERT_NO_FATAL_FAILURE(CompleteAndRun());
  CUfunction nop = nullptr;
  EXPECT_CU_OK(cuModuleGetFunction(&nop, linked_, "link_nop"));
  EXPECT_CU_OK(cuModuleGetFunction(&nop, linked_, "conf_add_u32"));
}

TEST_F(LinkTest, RejectsInvalidInputs) {
  ASSERT_CU_OK(cuLinkCreate(0, nullptr, nullptr, &link_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(1, nullptr, nullptr, &link_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLinkCreate(0, nullptr, nullptr, nullptr));
  // Log buffers belong to cuLinkCreate, not to one input (cuda.h).
  CUjit_option opt = CU_JIT_INFO_LOG_BUFFER;
  void* value = info_;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLinkAddData(link_, CU_JIT_INPUT_PTX, const_cast<char*>(kNopPtx), sizeof kNopPtx,
                          "nop", 1, &opt, &value));
  const char junk[] = "this is not an image";
  EXPECT_NE(CUDA_SUCCESS, cuLinkAddData(link_, CU_JIT_INPUT_CUBIN, const_cast<char*>(junk),
                                        sizeof junk, "junk", 0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_FILE_NOT_FOUND,
            cuLinkAddFile(link_, CU_JIT_INPUT_PTX, "/nonexistent/k.ptx", 0, nullptr, nullptr));
}

TEST_F(LinkTest, NeedsAContext) {
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  CUlinkState s = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuLinkCreate(0, nullptr, nullptr, &s));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx_));
}

class SimLinkTest : public LinkTest {};

// One input comes back as given; inputs the sim cannot read say so in the log.
TEST_F(SimLinkTest, OutputAndUnreadInputs) {
  SKIP_UNLESS_SIM();
  ASSERT_NO_FATAL_FAILURE(CreateWithLogs());
  const std::vector<uint8_t> cubin = ReadFile(CONF_CUBIN_PATH);
  ASSERT_CU_OK(cuLinkAddFile(link_, CU_JIT_INPUT_CUBIN, CONF_CUBIN_PATH, 0, nullptr, nullptr));
  void* image = nullptr;
  size_t size = 0;
  ASSERT_CU_OK(cuLinkComplete(link_, &image, &size));
  ASSERT_EQ(size, cubin.size());
  EXPECT_EQ(std::memcmp(image, cubin.data(), size), 0);
  char obj[] =
      "\x7f"
      "ELF host object";
  EXPECT_CU(CUDA_ERROR_INVALID_IMAGE, cuLinkAddData(link_, CU_JIT_INPUT_OBJECT, obj, sizeof obj,
                                                    "host.o", 0, nullptr, nullptr));
  EXPECT_NE(std::strstr(error_, "host.o"), nullptr) << error_;
  EXPECT_CU_OK(cuLinkDestroy(link_));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(link_));
  link_ = nullptr;
}

}  // namespace
}  // namespace vgpu::conformance
