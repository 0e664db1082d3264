# The simulated libnvidia-ml.so.1 (sim/nvml) against a simulated node that the
# test drives through NodeRegion. Included from tests/unit/CMakeLists.txt.
add_executable(sim_nvml_test sim_nvml_test.cc)
target_link_libraries(sim_nvml_test PRIVATE vgpu_sim_node vgpu_cuda_headers vgpu_warnings
                      GTest::gtest_main ${CMAKE_DL_LIBS})
# Loaded by path with dlopen, as monitoring tools load libnvidia-ml.so.1.
target_compile_definitions(sim_nvml_test PRIVATE VGPU_SIM_NVML_PATH="$<TARGET_FILE:vgpu_sim_nvml>")
add_dependencies(sim_nvml_test vgpu_sim_nvml)
gtest_discover_tests(sim_nvml_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)

# The board model behind the sensors, clocks and topology (sim/nvml/nvml_board.h).
add_executable(sim_nvml_board_test sim_nvml_board_test.cc)
target_link_libraries(sim_nvml_board_test PRIVATE vgpu_sim_node vgpu_cuda_headers vgpu_warnings
                      GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(sim_nvml_board_test PRIVATE
                           VGPU_SIM_NVML_PATH="$<TARGET_FILE:vgpu_sim_nvml>")
add_dependencies(sim_nvml_board_test vgpu_sim_nvml)
gtest_discover_tests(sim_nvml_board_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
