# The three device index spaces of libvgpu (intercept/device_index.h): distinct
# types, and the conversions between them. Header-only: no driver.
add_executable(device_index_test ${CMAKE_CURRENT_LIST_DIR}/device_index_test.cc)
target_include_directories(device_index_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(device_index_test PRIVATE vgpu_cuda_headers GTest::gtest_main vgpu_warnings)
gtest_discover_tests(device_index_test PROPERTIES LABELS unit)
