# VGPU_SANITIZE=address,undefined or thread (see CMakePresets.json).
set(VGPU_SANITIZE "" CACHE STRING "Sanitizers to build with (address,undefined | thread)")
if(VGPU_SANITIZE)
  add_compile_options(-fsanitize=${VGPU_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${VGPU_SANITIZE})
endif()
