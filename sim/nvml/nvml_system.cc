// nvmlInit*/nvmlShutdown, nvmlErrorString and the nvmlSystem* queries of the
// simulated libnvidia-ml.so.1.
#include <cuda.h>

#include <cstdio>
#include <cstring>

#include "driver/nvml_abi.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

// A driver branch that ships CUDA 13.0; "-sim" tells people (not parsers,
// which read the leading number) that this is the simulated node.
constexpr char kDriverVersion[] = "580.00-sim";
constexpr char kNvmlVersion[] = "13.580.00-sim";

struct ErrorText {
  nvmlReturn_t code;
  const char* text;
};

// The texts of NVIDIA's libnvidia-ml, which tools print verbatim.
constexpr ErrorText kErrorTexts[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "The operating system has blocked the request."},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "RM has detected an NVML/RM version mismatch."},
    {NVML_ERROR_IN_USE, "In use by another client"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED,
     "The requested vgpu operation is not available on target device, becasue ECC is enabled"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "Ran out of critical resources, other than memory"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "Frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {NVML_ERROR_DEPRECATED, "Deprecated"},
    {NVML_ERROR_NOT_READY, "Not Ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "Invalid state"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

// argv[0] of a process (what nvidia-smi shows), else its kernel name.
bool ReadProcessName(unsigned int pid, char* out, size_t size) {
  char path[64];
  for (const char* file : {"cmdline", "comm"}) {
    std::snprintf(path, sizeof path, "/proc/%u/%s", pid, file);
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) return false;
    size_t n = std::fread(out, 1, size - 1, f);
    std::fclose(f);
    out[n] = '\0';
    out[std::strcspn(out, "\n")] = '\0';  // comm ends with a newline
    if (out[0] != '\0') return true;      // kernel threads have an empty cmdline
  }
  return true;
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;

NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return nv::Init(flags); }
NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return nv::Init(0); }
NVML_EXPORT nvmlReturn_t nvmlInit(void) { return nv::Init(0); }
NVML_EXPORT nvmlReturn_t nvmlShutdown(void) { return nv::Shutdown(); }

NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  for (const auto& e : nv::kErrorTexts) {
    if (e.code == result) return e.text;
  }
  return "Unknown Error";
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  return nv::CopyOut(nv::kDriverVersion, version, length);
}

// Documented to work before nvmlInit, like the CUDA version below.
NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return nv::CopyOut(nv::kNvmlVersion, version, length);
}

// The CUDA version the simulated libcuda reports from cuDriverGetVersion.
NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *cudaDriverVersion = CUDA_VERSION;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

// Truncates to `length` like the real library (no INSUFFICIENT_SIZE here).
NVML_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name,
                                                  unsigned int length) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  char buf[4096];
  if (!nv::ReadProcessName(pid, buf, sizeof buf)) return NVML_ERROR_NOT_FOUND;
  std::snprintf(name, length, "%s", buf);
  return NVML_SUCCESS;
}
