# The counters table (common/counters.h) and docs/counters.md.
# Included from tests/unit/CMakeLists.txt.
add_executable(counters_test ${CMAKE_CURRENT_LIST_DIR}/counters_test.cc)
target_link_libraries(counters_test PRIVATE vgpu_common Threads::Threads vgpu_warnings
                      GTest::gtest_main)
target_compile_definitions(counters_test PRIVATE VGPU_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
gtest_discover_tests(counters_test PROPERTIES LABELS unit)
