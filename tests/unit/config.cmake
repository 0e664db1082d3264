# libvgpu configuration (common/config/config.h): every option, its aliases, the
# JSON file, precedence, and that docs/configuration.md documents the table.
# Included from tests/unit/CMakeLists.txt.
add_executable(config_test ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/config_ceilings_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/slurm_job_test.cc)
target_link_libraries(config_test PRIVATE vgpu_config vgpu_warnings GTest::gtest_main)
target_compile_definitions(config_test PRIVATE VGPU_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
gtest_discover_tests(config_test PROPERTIES LABELS unit)
