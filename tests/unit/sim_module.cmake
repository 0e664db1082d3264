# Module image readers of the simulated driver (sim/modules/cubin_reader, fatbin_reader,
# ptx_reader, module_image), its built-in kernels and kernel libraries.
# Included from tests/unit/CMakeLists.txt.

# Fixture images, built from one .cu file in every form the loaders accept.
set(VGPU_MODULE_FIXTURE_SRC ${CMAKE_CURRENT_SOURCE_DIR}/data/module_fixture.cu)
set(VGPU_MODULE_FIXTURE_DIR ${CMAKE_CURRENT_BINARY_DIR}/module_fixtures)
set(VGPU_MODULE_FIXTURES)
# vgpu_module_fixture(<file name> <nvcc arguments...>)
function(vgpu_module_fixture name)
  set(out ${VGPU_MODULE_FIXTURE_DIR}/${name})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${VGPU_MODULE_FIXTURE_DIR}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${ARGN} -o ${out} ${VGPU_MODULE_FIXTURE_SRC}
    DEPENDS ${VGPU_MODULE_FIXTURE_SRC}
    COMMENT "nvcc: module fixture ${name}"
    VERBATIM)
  set(VGPU_MODULE_FIXTURES ${VGPU_MODULE_FIXTURES} ${out} PARENT_SCOPE)
endfunction()
vgpu_module_fixture(fixture_sm90.cubin -cubin -arch=sm_90)
vgpu_module_fixture(fixture_sm80.cubin -cubin -arch=sm_80)
vgpu_module_fixture(fixture.ptx -ptx -arch=sm_90)
vgpu_module_fixture(fixture.fatbin -fatbin -arch=sm_90 --compress-mode=none)
vgpu_module_fixture(fixture_lz4.fatbin -fatbin -arch=sm_90 --compress-mode=speed
                    -Xfatbin=-compress-all)
vgpu_module_fixture(fixture_zstd.fatbin -fatbin -arch=sm_90 --compress-mode=size
                    -Xfatbin=-compress-all)
add_custom_target(sim_module_fixtures DEPENDS ${VGPU_MODULE_FIXTURES})

# A host kernel library, as VGPU_SIM_KERNELS would name it.
add_library(sim_module_test_kernels MODULE data/test_kernels.c)
target_include_directories(sim_module_test_kernels PRIVATE ${PROJECT_SOURCE_DIR}/sim/include)

add_executable(sim_module_unit_tests sim_module_readers_test.cc sim_module_kernels_test.cc)
target_link_libraries(sim_module_unit_tests PRIVATE vgpu_sim_kernels_obj vgpu_warnings
                      GTest::gtest_main)
add_dependencies(sim_module_unit_tests sim_module_fixtures sim_module_test_kernels)
target_compile_definitions(sim_module_unit_tests PRIVATE
  VGPU_FIXTURE_DIR="${VGPU_MODULE_FIXTURE_DIR}"
  VGPU_TEST_KERNEL_LIB="$<TARGET_FILE:sim_module_test_kernels>")
gtest_discover_tests(sim_module_unit_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)

# The module, library and launch entry points of the built libcuda.
add_executable(sim_module_api_tests sim_module_api_test.cc)
target_link_libraries(sim_module_api_tests PRIVATE vgpu_sim_cuda vgpu_cuda_headers vgpu_warnings
                      GTest::gtest_main Threads::Threads)
add_dependencies(sim_module_api_tests sim_module_fixtures sim_module_test_kernels)
target_compile_definitions(sim_module_api_tests PRIVATE
  VGPU_FIXTURE_DIR="${VGPU_MODULE_FIXTURE_DIR}"
  VGPU_TEST_KERNEL_LIB="$<TARGET_FILE:sim_module_test_kernels>")
gtest_discover_tests(sim_module_api_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
