# The residency engine (residency/engine.h) on the simulated driver, loaded
# as the table it is given (driver::LoadCuda): suspend/resume, checkpoint/
# restore, the non-migratable refusal, the state rules. Included from
# tests/unit/CMakeLists.txt.
add_executable(residency_engine_test residency_engine_test.cc)
target_link_libraries(residency_engine_test PRIVATE vgpu_residency vgpu_warnings GTest::gtest_main)
target_compile_definitions(residency_engine_test PRIVATE
  VGPU_SIM_LIBCUDA="$<TARGET_FILE:vgpu_sim_cuda>" __CUDA_API_VERSION_INTERNAL=1)
add_dependencies(residency_engine_test vgpu_sim_cuda)
gtest_discover_tests(residency_engine_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 60)

# The process's half of a migration (residency/migration.h) on a fake host and
# a private quota ledger: charges follow the driver's move, refusals hold
# nothing, the gate, the watchdog.
add_executable(migration_test migration_test.cc)
target_link_libraries(migration_test PRIVATE vgpu_residency vgpu_warnings GTest::gtest_main)
gtest_discover_tests(migration_test PROPERTIES LABELS unit TIMEOUT 60)

# Who a process shares IPC memory with, and the frees that wait for importers
# (residency/ipc_sharing.h), with a fake liveness check.
add_executable(ipc_sharing_test ipc_sharing_test.cc)
target_link_libraries(ipc_sharing_test PRIVATE vgpu_residency vgpu_warnings GTest::gtest_main)
gtest_discover_tests(ipc_sharing_test PROPERTIES LABELS unit TIMEOUT 60)
# Suspend on SIGTSTP: the decisions on fakes, the POSIX plumbing in-process.
add_executable(stop_signals_test stop_signals_test.cc)
target_link_libraries(stop_signals_test PRIVATE vgpu_residency vgpu_warnings GTest::gtest_main)
gtest_discover_tests(stop_signals_test PROPERTIES LABELS unit TIMEOUT 60)
