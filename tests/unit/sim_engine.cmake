# The simulated device's engine timeline (sim/node/node_region.cc, sim/engine/stream.cc):
# NodeRegion directly and the simulated libcuda's stream worker.
# Included from tests/unit/CMakeLists.txt.
add_executable(sim_engine_test sim_engine_test.cc)
# Linked against the sim's libcuda.so.1 (RUNPATH), and the node region code
# for reading the engine's accounting as other processes do.
target_link_libraries(sim_engine_test PRIVATE vgpu_sim_cuda vgpu_sim_node vgpu_cuda_headers
                      vgpu_warnings GTest::gtest_main)
gtest_discover_tests(sim_engine_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
