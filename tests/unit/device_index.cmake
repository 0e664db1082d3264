# libvgpu parts that need no driver. The three device index spaces
# (common/device_index.h): distinct types, and the conversions between them.
# DeviceMap::Build on a list of node UUIDs (no driver is loaded).
add_executable(device_index_test ${CMAKE_CURRENT_LIST_DIR}/device_index_test.cc
               ${PROJECT_SOURCE_DIR}/intercept/device_map.cc)
target_include_directories(device_index_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(device_index_test PRIVATE vgpu_driver vgpu_common vgpu_cuda_headers
                      GTest::gtest_main vgpu_warnings)
gtest_discover_tests(device_index_test PROPERTIES LABELS unit)

# The book of non-migratable memory (intercept/non_migratable.h).
add_executable(non_migratable_test ${CMAKE_CURRENT_LIST_DIR}/non_migratable_test.cc
               ${PROJECT_SOURCE_DIR}/intercept/non_migratable.cc)
target_include_directories(non_migratable_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(non_migratable_test PRIVATE vgpu_cuda_headers GTest::gtest_main vgpu_warnings)
gtest_discover_tests(non_migratable_test PROPERTIES LABELS unit)
