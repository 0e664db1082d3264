# VGPU_SANITIZE=address,undefined or thread (see CMakePresets.json).
set(VGPU_SANITIZE "" CACHE STRING "Sanitizers to build with (address,undefined | thread)")
if(VGPU_SANITIZE)
  # No recovery: a UBSan report ends the process with an error, so a test (and
  # CI) fails instead of printing and passing.
  add_compile_options(-fsanitize=${VGPU_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${VGPU_SANITIZE} -fno-sanitize-recover=all)
endif()
