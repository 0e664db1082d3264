# Every dependency comes from Debian packages plus the CUDA toolkit headers.
find_package(CUDAToolkit REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
# XXH64 (checkpoint image checksums) from libxxhash-dev, compiled inline: only
# its header is used (checkpoint/xxh64.h), so nothing links libxxhash.so.
pkg_check_modules(XXHASH REQUIRED libxxhash>=0.8)
add_library(vgpu_xxhash INTERFACE)
target_include_directories(vgpu_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIRS})
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
find_package(Python3 REQUIRED COMPONENTS Interpreter)

# cuda.h and friends only: nothing in vgpu links the driver.
add_library(vgpu_cuda_headers INTERFACE)
target_include_directories(vgpu_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})

# spdlog and fmt from their headers, linked into each binary, never as shared
# libraries (common/log.h says why). Their implementation is compiled once, in
# common/log_impl.cc; every other file sees declarations only (header-only
# mode compiled fmt into each of them: ~17 s a file, most of a build).
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
add_library(vgpu_spdlog INTERFACE)
target_compile_definitions(vgpu_spdlog INTERFACE SPDLOG_FMT_EXTERNAL SPDLOG_COMPILED_LIB)
target_include_directories(vgpu_spdlog SYSTEM INTERFACE
  $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:fmt::fmt-header-only,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(vgpu_spdlog INTERFACE Threads::Threads)

# A container image may hold nothing but glibc (docs/containers.md): libraries
# and programs that the CDI spec puts into a container link the C++ runtime
# (and the archives named) statically and keep those symbols out of their
# dynamic table, so they need only libc, libm and the loader. Sanitizer builds
# keep the shared runtime their instrumentation is built around.
function(vgpu_link_glibc_only target)
  if(VGPU_SANITIZE)
    return()
  endif()
  foreach(archive IN LISTS ARGN)
    find_library(VGPU_STATIC_${archive} NAMES lib${archive}.a REQUIRED)
    target_link_libraries(${target} PRIVATE ${VGPU_STATIC_${archive}})
  endforeach()
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL
    -Wl,--as-needed)
endfunction()
