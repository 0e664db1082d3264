# Runs vgpu_sample_train and train.py with the same arguments and checks that
# they print the same losses and the same final checksum.
#   cmake -DPYTHON=... -DSCRIPT=train.py -DTRAIN=vgpu_sample_train
#         -DMODULE=sgd_kernels.cubin [-DPRELOAD=libasan.so] -P compare_train.cmake
# PRELOAD: a sanitizer runtime that python (not instrumented) must preload.
set(args --steps 30 --report-every 5 ${MODULE})

function(run_and_extract out)
  execute_process(COMMAND ${ARGN} ${args} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN} exited with ${rc}\n${stdout}\n${stderr}")
  endif()
  string(REGEX MATCHALL "(step +[0-9]+ +loss [^\n]*|checksum: 0x[0-9a-f]+)" lines "${stdout}")
  if(NOT lines MATCHES "checksum: 0x")
    message(FATAL_ERROR "${ARGN}: no checksum in output\n${stdout}")
  endif()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

run_and_extract(cc ${TRAIN})
set(python ${PYTHON})
if(PRELOAD)
  set(python ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} ASAN_OPTIONS=detect_leaks=0 ${PYTHON})
endif()
run_and_extract(py ${python} ${SCRIPT})
string(REPLACE ";" "\n" cc_text "${cc}")
string(REPLACE ";" "\n" py_text "${py}")
if(NOT cc_text STREQUAL py_text)
  message(FATAL_ERROR "C++ and Python outputs differ\n--- C++\n${cc_text}\n--- Python\n${py_text}")
endif()
message(STATUS "C++ and Python agree:\n${cc_text}")
