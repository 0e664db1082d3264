// CUresult onto vgpu's one error type (common/status.h): the only place that
// decides which driver errors mean which code.
#pragma once

#include <cuda.h>

#include <string>

#include "common/status.h"

namespace vgpu::driver {

inline ErrorCode CuErrorCode(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return ErrorCode::kOk;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return ErrorCode::kNoMem;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_INVALID_DEVICE:
      return ErrorCode::kInval;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NOT_FOUND:
      return ErrorCode::kNoSys;
    case CUDA_ERROR_NOT_PERMITTED:
      return ErrorCode::kPerm;
    default:
      return ErrorCode::kIo;
  }
}

inline std::string CuErrorText(CUresult r) { return "CUDA error " + std::to_string(static_cast<int>(r)); }

// "what: CUDA error N"; success stays success.
inline Status CuStatus(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  return Status::Error(CuErrorCode(r), what + ": " + CuErrorText(r));
}

}  // namespace vgpu::driver
