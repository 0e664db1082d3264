# Allocation call sites (common/call_sites.h). ENABLE_EXPORTS: the test's own
# functions are in the dynamic symbol table, so a site is described by name.
add_executable(call_sites_test ${CMAKE_CURRENT_LIST_DIR}/call_sites_test.cc)
set_target_properties(call_sites_test PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(call_sites_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(call_sites_test PROPERTIES LABELS unit)

