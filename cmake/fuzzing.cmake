# VGPU_FUZZ=ON (clang only; scripts/fuzz.sh configures it in build-fuzz/):
# every target of the build is compiled with libFuzzer coverage, ASan and
# UBSan, so the fuzz targets of tests/fuzz link the ordinary libraries and
# the fuzzer sees coverage inside them. FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
# (the OSS-Fuzz convention) lets the checkpoint reader pass digest and frame
# checksum mismatches, so that the fuzzer gets past hashes it cannot forge:
# nothing of such a build may be used for anything but fuzzing.
option(VGPU_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)
if(VGPU_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES Clang)
    message(FATAL_ERROR "VGPU_FUZZ needs clang (libFuzzer): CC=clang CXX=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  add_link_options(-fsanitize=address,undefined)
endif()
