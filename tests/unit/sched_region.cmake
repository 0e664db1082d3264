add_executable(sched_region_test ${CMAKE_CURRENT_LIST_DIR}/sched_region_test.cc)
target_link_libraries(sched_region_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(sched_region_test PROPERTIES LABELS unit)
