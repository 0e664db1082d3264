# Process liveness (common/process_info.h). The tests fork.
add_executable(process_info_test ${CMAKE_CURRENT_LIST_DIR}/process_info_test.cc)
target_link_libraries(process_info_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(process_info_test PROPERTIES LABELS unit)
