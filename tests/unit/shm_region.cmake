# The shared-region opener (common/shm_region.h) that the quota ledger and the
# scheduler region share. Included from tests/unit/CMakeLists.txt; uses /dev/shm.
add_executable(shm_region_test ${CMAKE_CURRENT_LIST_DIR}/shm_region_test.cc)
target_link_libraries(shm_region_test PRIVATE vgpu_common GTest::gtest_main vgpu_warnings)
gtest_discover_tests(shm_region_test PROPERTIES LABELS unit)
