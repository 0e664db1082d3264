# cuGetProcAddress table: the derivation (driver/tools/gen_proc_table.py), its
# lookup rules (driver/proc_table.h) and the built sim's entry points
# (sim/api/api_procaddress.cc). Included from tests/unit/CMakeLists.txt.

# A copy of the table for the test itself, generated exactly as sim/ does, so
# that the test checks the generator's output independently of libcuda.
file(GLOB VGPU_PROC_TEST_API_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sim/api/api_*.cc)
set(VGPU_PROC_TEST_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/proc_table_generated)
set(VGPU_PROC_TEST_INC ${VGPU_PROC_TEST_GEN_DIR}/proc_table.inc)
set(VGPU_PROC_TEST_GENERATOR ${PROJECT_SOURCE_DIR}/driver/tools/gen_proc_table.py)
add_custom_command(
  OUTPUT ${VGPU_PROC_TEST_INC}
  COMMAND ${Python3_EXECUTABLE} ${VGPU_PROC_TEST_GENERATOR}
          --cuda-h ${CUDAToolkit_INCLUDE_DIRS}/cuda.h
          --typedefs ${CUDAToolkit_INCLUDE_DIRS}/cudaTypedefs.h
          --out ${VGPU_PROC_TEST_INC} ${VGPU_PROC_TEST_API_SOURCES}
  DEPENDS ${VGPU_PROC_TEST_GENERATOR} ${VGPU_PROC_TEST_API_SOURCES}
  COMMENT "Generating cuGetProcAddress table for proc_table_test")

add_executable(proc_table_test proc_table_test.cc ${VGPU_PROC_TEST_INC})
target_include_directories(proc_table_test PRIVATE ${PROJECT_SOURCE_DIR} ${VGPU_PROC_TEST_GEN_DIR})
target_link_libraries(proc_table_test PRIVATE vgpu_cuda_headers vgpu_warnings GTest::gtest_main
                      ${CMAKE_DL_LIBS})
# The sim is loaded by path with dlopen, never linked: the test also checks
# what a cudart-style client sees through cuGetProcAddress_v2.
target_compile_definitions(proc_table_test PRIVATE
                           VGPU_SIM_CUDA_PATH="$<TARGET_FILE:vgpu_sim_cuda>")
add_dependencies(proc_table_test vgpu_sim_cuda)
gtest_discover_tests(proc_table_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)

# The derivation against the toolkit's stub libcuda: every symbol it exports
# must be reachable, and every cudaTypedefs.h entry must name an export.
set(VGPU_STUB_LIBCUDA ${CUDAToolkit_LIBRARY_DIR}/stubs/libcuda.so)
if(EXISTS ${VGPU_STUB_LIBCUDA})
  add_test(NAME proc_table_matches_stub_libcuda
           COMMAND ${Python3_EXECUTABLE} ${VGPU_PROC_TEST_GENERATOR}
                   --cuda-h ${CUDAToolkit_INCLUDE_DIRS}/cuda.h
                   --typedefs ${CUDAToolkit_INCLUDE_DIRS}/cudaTypedefs.h
                   --check-stub ${VGPU_STUB_LIBCUDA})
endif()

# The built sim exports every symbol of the stub, as a real driver does
# (unimplemented ones as CUDA_ERROR_NOT_SUPPORTED stubs); missing ones by name.
if(EXISTS ${VGPU_STUB_LIBCUDA})
  add_test(NAME sim_libcuda_exports_stub_symbols
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/sim_exports_test.py
                   ${VGPU_STUB_LIBCUDA} $<TARGET_FILE:vgpu_sim_cuda>)
  set_tests_properties(sim_libcuda_exports_stub_symbols PROPERTIES LABELS unit)
endif()
# The toolkit ships no libnvidia-ml stub, so the simulated NVML has none to
# be compared with.

# The derivation rules on small synthetic headers (exceptions, legacy section,
# per-thread pairing, #undef in sources).
add_test(NAME gen_proc_table_rules
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gen_proc_table_test.py
                 ${VGPU_PROC_TEST_GENERATOR})

# The CUresult name table's generator (sim/tools/gen_error_table.py) creates
# its output directory: a fresh -j2 build may run it first.
add_test(NAME gen_error_table_creates_output_dir
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gen_error_table_test.py
                 ${PROJECT_SOURCE_DIR}/sim/tools/gen_error_table.py ${CUDAToolkit_INCLUDE_DIRS}/cuda.h)
set_tests_properties(gen_error_table_creates_output_dir PROPERTIES LABELS unit)

# Every driver entry point the toolkit's cudart asks for must be in the table.
find_library(VGPU_CUDART_LIB NAMES cudart PATHS ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
if(VGPU_CUDART_LIB)
  add_test(NAME proc_table_covers_cudart
           COMMAND ${Python3_EXECUTABLE} ${VGPU_PROC_TEST_GENERATOR}
                   --cuda-h ${CUDAToolkit_INCLUDE_DIRS}/cuda.h
                   --typedefs ${CUDAToolkit_INCLUDE_DIRS}/cudaTypedefs.h
                   --check-cudart ${VGPU_CUDART_LIB})
endif()

set_tests_properties(gen_proc_table_rules PROPERTIES LABELS unit)
if(TEST proc_table_matches_stub_libcuda)
  set_tests_properties(proc_table_matches_stub_libcuda PROPERTIES LABELS unit)
endif()
if(TEST proc_table_covers_cudart)
  set_tests_properties(proc_table_covers_cudart PROPERTIES LABELS unit)
endif()
