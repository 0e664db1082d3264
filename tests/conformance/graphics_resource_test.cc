// Graphics resources (cuGraphics*) on the simulated node, which has no
// graphics API context: registration is refused, and no resource exists for
// the other calls (sim/api/api_graphics_resource.cc). Sim-only: a GPU node with
// a display answers differently.
#include <dlfcn.h>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

using RegisterBuffer = CUresult (*)(CUgraphicsResource*, unsigned int, unsigned int);

class SimGraphicsResourceTest : public ContextTest {};

TEST_F(SimGraphicsResourceTest, RegistrationNeedsAGraphicsContext) {
  SKIP_UNLESS_SIM();
  auto reg = reinterpret_cast<RegisterBuffer>(dlsym(RTLD_DEFAULT, "cuGraphicsGLRegisterBuffer"));
  ASSERT_NE(reg, nullptr);
  CUgraphicsResource r = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, reg(&r, 1, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, reg(nullptr, 1, 0));
}

TEST_F(SimGraphicsResourceTest, NoResourceExists) {
  SKIP_UNLESS_SIM();
  auto fake = reinterpret_cast<CUgraphicsResource>(0x1000);
  CUdeviceptr p = 0;
  size_t size = 0;
  CUarray a = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphicsResourceGetMappedPointer(&p, &size, fake));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphicsResourceGetMappedPointer(nullptr, &size, fake));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphicsSubResourceGetMappedArray(&a, fake, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphicsUnregisterResource(fake));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphicsResourceSetMapFlags(fake, 7));
  EXPECT_CU_OK(cuGraphicsMapResources(0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphicsMapResources(1, &fake, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphicsUnmapResources(1, nullptr, nullptr));
}

}  // namespace
}  // namespace vgpu::conformance
