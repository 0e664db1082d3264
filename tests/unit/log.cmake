# Logging (common/log.h).
add_executable(log_test ${CMAKE_CURRENT_LIST_DIR}/log_test.cc)
target_link_libraries(log_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(log_test PROPERTIES LABELS unit)
