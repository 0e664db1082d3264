add_library(vgpu_warnings INTERFACE)
target_compile_options(vgpu_warnings INTERFACE
  -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
