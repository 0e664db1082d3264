// VGPU_SIM_FAULTS="name:N:code[,name:N:code...]": the N-th call (1-based) of
// the exported entry point `name` returns CUresult `code` without doing
// anything. Used by reliability tests of the sim and of libvgpu.
#pragma once

#include <cuda.h>

#include <string>

namespace vgpu::sim {

// Parses the spec; false with a message if malformed.
bool ConfigureFaults(const std::string& spec, std::string* error);
// CUDA_SUCCESS, or the code to inject for this call of `name`.
CUresult InjectedFault(const char* name);
bool FaultsConfigured();

}  // namespace vgpu::sim
