// The pre-CUDA-4.0 execution control API (deprecated, still implemented by
// current drivers): block shape, dynamic shared memory and a parameter
// buffer set on the function, then cuLaunch/cuLaunchGrid(Async). Each launch
// is a cuLaunchKernel with the buffer passed through `extra`
// (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), so it follows that path's rules.
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/modules/kernel_handles.h"
#include "sim/engine/texture.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// What the old API keeps per function. Block shape 0 until set: launching an
// unconfigured function is an invalid configuration, as on the driver.
struct LegacyLaunchState {
  unsigned block[3] = {0, 0, 0};
  unsigned shared_bytes = 0;
  std::vector<unsigned char> params;
};

// The documented limit of a kernel's parameters (CUDA 12.1+, Volta and later).
constexpr size_t kMaxParamBytes = 32764;

std::mutex g_mu;
std::map<CUfunction, LegacyLaunchState>* g_state = new std::map<CUfunction, LegacyLaunchState>();

bool ValidFunction(CUfunction f) {
  HandleRef h(f);
  return static_cast<bool>(h);
}

// Runs `fn` on the function's state under the lock, after checking the handle.
template <typename F>
CUresult WithState(CUfunction f, F fn) {
  if (!ValidFunction(f)) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(g_mu);
  return fn((*g_state)[f]);
}

CUresult SetParamBytes(CUfunction f, int offset, const void* data, unsigned bytes) {
  if (offset < 0 || (data == nullptr && bytes != 0)) return CUDA_ERROR_INVALID_VALUE;
  const size_t end = static_cast<size_t>(offset) + bytes;
  if (end > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
  return WithState(f, [&](LegacyLaunchState& s) {
    if (s.params.size() < end) s.params.resize(end);
    if (bytes != 0) std::memcpy(s.params.data() + offset, data, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult LaunchLegacy(CUfunction f, unsigned grid_x, unsigned grid_y, CUstream stream) {
  LegacyLaunchState s;
  if (CUresult r = WithState(f, [&](LegacyLaunchState& st) {
        s = st;
        return CUDA_SUCCESS;
      });
      r != CUDA_SUCCESS) {
    return r;
  }
  size_t size = s.params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, s.params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, grid_x, grid_y, 1, s.block[0], s.block[1], s.block[2], s.shared_bytes, stream,
                        nullptr, extra);
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z) {
  SIM_ENTER("cuFuncSetBlockShape");
  if (x <= 0 || y <= 0 || z <= 0) return CUDA_ERROR_INVALID_VALUE;
  return WithState(hfunc, [&](LegacyLaunchState& s) {
    s.block[0] = static_cast<unsigned>(x), s.block[1] = static_cast<unsigned>(y);
    s.block[2] = static_cast<unsigned>(z);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes) {
  SIM_ENTER("cuFuncSetSharedSize");
  return WithState(hfunc, [&](LegacyLaunchState& s) {
    s.shared_bytes = bytes;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuParamSetSize(CUfunction hfunc, unsigned int numbytes) {
  SIM_ENTER("cuParamSetSize");
  if (numbytes > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
  return WithState(hfunc, [&](LegacyLaunchState& s) {
    s.params.resize(numbytes);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuParamSeti(CUfunction hfunc, int offset, unsigned int value) {
  SIM_ENTER("cuParamSeti");
  return SetParamBytes(hfunc, offset, &value, sizeof value);
}

SIM_EXPORT CUresult CUDAAPI cuParamSetf(CUfunction hfunc, int offset, float value) {
  SIM_ENTER("cuParamSetf");
  return SetParamBytes(hfunc, offset, &value, sizeof value);
}

SIM_EXPORT CUresult CUDAAPI cuParamSetv(CUfunction hfunc, int offset, void* ptr, unsigned int numbytes) {
  SIM_ENTER("cuParamSetv");
  return SetParamBytes(hfunc, offset, ptr, numbytes);
}

// The only texture references are cuTexRefCreate's (modules carry none: nvcc
// 12+ emits none). Kernels in the sim do not sample, so binding one to a
// function records nothing.
SIM_EXPORT CUresult CUDAAPI cuParamSetTexRef(CUfunction hfunc, int texunit, CUtexref hTexRef) {
  SIM_ENTER("cuParamSetTexRef");
  if (texunit != CU_PARAM_TR_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidFunction(hfunc) || !IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLaunch(CUfunction f) {
  SIM_ENTER("cuLaunch");
  return LaunchLegacy(f, 1, 1, nullptr);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  SIM_ENTER("cuLaunchGrid");
  if (grid_width <= 0 || grid_height <= 0) return CUDA_ERROR_INVALID_VALUE;
  return LaunchLegacy(f, static_cast<unsigned>(grid_width), static_cast<unsigned>(grid_height), nullptr);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream) {
  SIM_ENTER("cuLaunchGridAsync");
  if (grid_width <= 0 || grid_height <= 0) return CUDA_ERROR_INVALID_VALUE;
  return LaunchLegacy(f, static_cast<unsigned>(grid_width), static_cast<unsigned>(grid_height), hStream);
}
