# The quiesce gate (residency/quiesce_gate.h), compiled into the test directly:
# it needs no driver. Included from tests/unit/CMakeLists.txt.
add_executable(quiesce_gate_test ${CMAKE_CURRENT_LIST_DIR}/quiesce_gate_test.cc
               ${PROJECT_SOURCE_DIR}/residency/quiesce_gate.cc)
target_include_directories(quiesce_gate_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(quiesce_gate_test PRIVATE vgpu_common Threads::Threads GTest::gtest_main vgpu_warnings)
gtest_discover_tests(quiesce_gate_test PROPERTIES LABELS unit)
