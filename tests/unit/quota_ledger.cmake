# The shared device-memory ledger (quota/quota_ledger.h): limits, sharing,
# a race of processes x threads, SIGKILLed members, damaged and foreign
# regions. Included from tests/unit/CMakeLists.txt. The tests fork and use
# /dev/shm; they also pass under the tsan preset.
add_executable(quota_ledger_test quota_ledger_test.cc)
target_link_libraries(quota_ledger_test PRIVATE vgpu_quota vgpu_common vgpu_warnings GTest::gtest_main
                      Threads::Threads)
gtest_discover_tests(quota_ledger_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 120)

# The process side of the quota (quota/allocation_accounting.h) on a fake
# quota: reserve/commit/free, stale charges, resize, context teardown.
add_executable(allocation_accounting_test allocation_accounting_test.cc)
target_link_libraries(allocation_accounting_test PRIVATE vgpu_quota vgpu_common vgpu_warnings
                      GTest::gtest_main)
gtest_discover_tests(allocation_accounting_test PROPERTIES LABELS unit TIMEOUT 30)

# The graph-memory charge (quota/graph_memory_charge.h) on fake pools.
add_executable(graph_memory_charge_test graph_memory_charge_test.cc)
target_link_libraries(graph_memory_charge_test PRIVATE vgpu_quota vgpu_common vgpu_warnings
                      GTest::gtest_main)
gtest_discover_tests(graph_memory_charge_test PROPERTIES LABELS unit TIMEOUT 30)

# cuMemCreate memory released while still mapped (quota/mapped_handles.h): the
# charge waits for the last unmap.
add_executable(mapped_handles_test mapped_handles_test.cc)
target_link_libraries(mapped_handles_test PRIVATE vgpu_quota vgpu_common vgpu_warnings
                      GTest::gtest_main)
gtest_discover_tests(mapped_handles_test PROPERTIES LABELS unit TIMEOUT 30)
