# The shared device-memory ledger (quota/quota_ledger.h): limits, sharing,
# a race of processes x threads, SIGKILLed members, damaged and foreign
# regions. Included from tests/unit/CMakeLists.txt. The tests fork and use
# /dev/shm; they also pass under the tsan preset.
add_executable(quota_ledger_test quota_ledger_test.cc)
target_link_libraries(quota_ledger_test PRIVATE vgpu_quota vgpu_common vgpu_warnings GTest::gtest_main
                      Threads::Threads)
gtest_discover_tests(quota_ledger_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 120)
