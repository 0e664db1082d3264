# Checkpoint image format (checkpoint/): round trips, every kind of damage,
# interrupted and failing writers, concurrent readers. Included from
# tests/unit/CMakeLists.txt. Needs no GPU; some tests fork.
add_executable(checkpoint_image_test ${CMAKE_CURRENT_LIST_DIR}/checkpoint_image_test.cc)
target_link_libraries(checkpoint_image_test PRIVATE vgpu_checkpoint vgpu_warnings
                      GTest::gtest_main Threads::Threads)
gtest_discover_tests(checkpoint_image_test DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS unit TIMEOUT 300)

# Frame-level APIs of the residency pipeline (NextFrame/CommitFrame, FrameDecoder).
add_executable(checkpoint_frames_test ${CMAKE_CURRENT_LIST_DIR}/checkpoint_frames_test.cc)
target_link_libraries(checkpoint_frames_test PRIVATE vgpu_checkpoint vgpu_warnings
                      GTest::gtest_main Threads::Threads)
gtest_discover_tests(checkpoint_frames_test DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS unit TIMEOUT 120)

# O_DIRECT reads of image frames, and the fallback to buffered reads.
add_executable(checkpoint_direct_io_test ${CMAKE_CURRENT_LIST_DIR}/checkpoint_direct_io_test.cc)
target_link_libraries(checkpoint_direct_io_test PRIVATE vgpu_checkpoint vgpu_warnings
                      GTest::gtest_main Threads::Threads)
gtest_discover_tests(checkpoint_direct_io_test DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS unit TIMEOUT 120)

# An image written before the switch to Debian's libxxhash (tests/unit/data/)
# still opens, verifies and restores.
add_executable(checkpoint_legacy_image_test ${CMAKE_CURRENT_LIST_DIR}/checkpoint_legacy_image_test.cc)
target_link_libraries(checkpoint_legacy_image_test PRIVATE vgpu_checkpoint vgpu_warnings
                      GTest::gtest_main)
target_compile_definitions(checkpoint_legacy_image_test PRIVATE
                           VGPU_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
gtest_discover_tests(checkpoint_legacy_image_test PROPERTIES LABELS unit)
