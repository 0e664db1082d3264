// cuGetProcAddress (v1 and v2) and cuGetExportTable. cudart resolves nearly
// every driver entry point through cuGetProcAddress_v2(base name, ABI version,
// flags), so this is how real CUDA programs reach the sim.
//
// __CUDA_API_VERSION_INTERNAL makes cuda.h declare the legacy prototypes (the
// 4-argument cuGetProcAddress) and #undef its cuX -> cuX_v2 renaming macros
// before the definitions below, as in the real driver's build; _ODR keeps the
// enums identical to the other translation units'.
#define __CUDA_API_VERSION_INTERNAL 1
#define __CUDA_API_VERSION_INTERNAL_ODR 1

#include <cstddef>
#include <cstdint>

#include "driver/proc_table.h"
#include "sim/api/api_common.h"
// Generated from the toolkit headers; see driver/tools/gen_proc_table.py.
#include "proc_table.inc"

namespace vgpu::sim {
namespace {

using driver::kProcDriverVersion;
using driver::kProcTable;
using driver::LookupProc;
using driver::ProcLookup;

constexpr size_t kProcTableSize = sizeof(kProcTable) / sizeof(kProcTable[0]);
constexpr cuuint64_t kKnownFlags =
    CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

// Shared by both versions. An unknown name or a too old version is
// CUDA_SUCCESS with a NULL pointer and the status saying which, as the
// 12.x/13.x header text says and as driver 580 answers cuGetProcAddress_v2
// (H200, 2026-11-26, docs/gpu-validation.md; the 4-argument entry was not
// measured and is assumed to share the code).
CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  // The flags are one search mode, not a set: both modes at once is invalid.
  if ((flags & ~kKnownFlags) != 0 || flags == kKnownFlags) return CUDA_ERROR_INVALID_VALUE;
  // Documented: asking for an ABI newer than the driver is invalid.
  if (cuda_version > kProcDriverVersion) return CUDA_ERROR_INVALID_VALUE;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  ProcLookup found = LookupProc(kProcTable, kProcTableSize, symbol, cuda_version, per_thread);
  if (status != nullptr) *status = found.status;
  if (found.entry == nullptr) return CUDA_SUCCESS;
  // An entry point the sim lacks yields its exported stub, which returns
  // CUDA_ERROR_NOT_SUPPORTED, so that clients which resolve everything up
  // front (cudart) start and fail clearly only when they call it.
  *pfn = found.entry->fn;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace vgpu::sim

// Valid before cuInit: cudart resolves cuInit itself through it.
SIM_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                cuuint64_t flags,
                                                CUdriverProcAddressQueryResult* symbolStatus) {
  SIM_ENTER_NOINIT("cuGetProcAddress_v2");
  return vgpu::sim::GetProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

// The CUDA 11.3 entry point: the same search, without the status.
SIM_EXPORT CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                             cuuint64_t flags) {
  SIM_ENTER_NOINIT("cuGetProcAddress");
  return vgpu::sim::GetProcAddress(symbol, pfn, cudaVersion, flags, nullptr);
}

// cudart's private tables are undocumented; the sim does not emulate them.
SIM_EXPORT CUresult CUDAAPI cuGetExportTable(const void** ppExportTable,
                                             const CUuuid* pExportTableId) {
  SIM_ENTER_NOINIT("cuGetExportTable");
  if (ppExportTable != nullptr) *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
