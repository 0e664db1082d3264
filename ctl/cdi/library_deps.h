// The shared libraries a driver library needs besides glibc, so that the CDI
// spec can mount them into an image that holds nothing but glibc. A real
// driver's libcuda.so.1 needs none; the simulated node's needs libelf (which
// cannot be linked into a shared object statically) and its libz.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace vgpu::cdi {

// The DT_NEEDED sonames of the ELF shared object at `path`.
Status NeededSonames(const std::string& path, std::vector<std::string>* out);

// Whether `soname` is part of glibc (every image has it, and the image's own
// copy must be used: it matches the image's loader).
bool IsGlibcSoname(std::string_view soname);

// The host paths of the non-glibc libraries `libraries` need, transitively,
// each found first in `driver_dir`, else where `ldconfig -p` (the text
// `ldconfig_output`) says. A soname found nowhere is an error: the library
// would not load in the container either.
Status NonGlibcDependencies(const std::vector<std::string>& libraries,
                            const std::string& driver_dir, std::string_view ldconfig_output,
                            std::vector<std::string>* out);

}  // namespace vgpu::cdi
