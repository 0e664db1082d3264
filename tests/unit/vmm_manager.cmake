# vmm::Manager (vmm/) on the simulated driver, linked directly (not through
# libvgpu): physical-chunk charging and the freed-chunk cache. Included from
# tests/unit/CMakeLists.txt; builds under the asan and tsan presets.
add_executable(vmm_manager_test vmm_manager_test.cc)
target_link_libraries(vmm_manager_test PRIVATE vgpu_vmm vgpu_sim_cuda vgpu_cuda_headers vgpu_warnings
                      GTest::gtest_main)
# The versioned entry points (cuMemcpyDtoH_v2, ...) under their own names, as vmm.cc sees them.
target_compile_definitions(vmm_manager_test PRIVATE __CUDA_API_VERSION_INTERNAL=1)
gtest_discover_tests(vmm_manager_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
