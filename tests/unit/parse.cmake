# The one set of value parsers (common/parse.h).
add_executable(parse_test ${CMAKE_CURRENT_LIST_DIR}/parse_test.cc)
target_link_libraries(parse_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(parse_test PROPERTIES LABELS unit)
