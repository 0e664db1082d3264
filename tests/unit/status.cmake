# vgpu's one error type (common/status.h): Status and Result<T>. Included from
# tests/unit/CMakeLists.txt.
add_executable(status_test status_test.cc)
target_link_libraries(status_test PRIVATE vgpu_common vgpu_warnings GTest::gtest_main)
gtest_discover_tests(status_test PROPERTIES LABELS unit TIMEOUT 30)
