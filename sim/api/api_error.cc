// cuGetErrorName / cuGetErrorString, from a table generated out of cuda.h.
#include <cstddef>

#include "sim/api/api_common.h"

namespace {

struct ErrorEntry {
  int code;
  const char* name;
  const char* text;
};

constexpr ErrorEntry kErrors[] = {
#include "error_table.inc"
};

const ErrorEntry* Find(CUresult error) {
  for (const auto& e : kErrors) {
    if (e.code == static_cast<int>(error)) return &e;
  }
  return nullptr;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  SIM_ENTER_NOINIT("cuGetErrorName");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = Find(error);
  *pStr = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  SIM_ENTER_NOINIT("cuGetErrorString");
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = Find(error);
  *pStr = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
