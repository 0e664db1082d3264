// main() of the conformance test executables: a private simulated node per
// process, set up before anything touches CUDA.
#include <gtest/gtest.h>

#include "conformance_common.h"

int main(int argc, char** argv) {
  vgpu::conformance::PrepareSimEnvironment(CONF_KERNELS_HOST_PATH);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
