#include "driver/node_gpus.h"

#include <utility>

#include "driver/real_driver.h"

namespace vgpu::driver {

Status NodeGpus::Init() {
  if (ready_) return Status::Ok();
  if (Nvml().handle == nullptr) {
    return Status::Error(ErrorCode::kNoEnt, "libnvidia-ml.so.1 cannot be loaded");
  }
  nvmlReturn_t r = REAL_NVML_CALL(nvmlInit_v2);
  if (r != NVML_SUCCESS) {
    return Status::Error(ErrorCode::kIo, "nvmlInit_v2 failed: " + std::to_string(r));
  }
  ready_ = true;
  return Status::Ok();
}

std::vector<GpuMemory> NodeGpus::Read() const {
  std::vector<GpuMemory> out;
  unsigned count = 0;
  if (!ready_ || REAL_NVML_CALL(nvmlDeviceGetCount_v2, &count) != NVML_SUCCESS) return out;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (REAL_NVML_CALL(nvmlDeviceGetHandleByIndex_v2, i, &d) != NVML_SUCCESS) continue;
    char uuid[96] = {};
    if (REAL_NVML_CALL(nvmlDeviceGetUUID, d, uuid, sizeof uuid) != NVML_SUCCESS) continue;
    // The capacity jobs can allocate: NVML's total counts what the driver
    // reserves for itself (615 MiB on an H200 with driver 580), which
    // cuDeviceTotalMem leaves out; the v2 call says how much.
    nvmlMemory_v2_t v2{};
    v2.version = nvmlMemory_v2;
    if (REAL_NVML_CALL(nvmlDeviceGetMemoryInfo_v2, d, &v2) == NVML_SUCCESS) {
      out.push_back(GpuMemory{uuid, static_cast<int>(i), v2.used, v2.total - v2.reserved});
      continue;
    }
    nvmlMemory_t m{};
    if (REAL_NVML_CALL(nvmlDeviceGetMemoryInfo, d, &m) != NVML_SUCCESS) continue;
    out.push_back(GpuMemory{uuid, static_cast<int>(i), m.used, m.total});
  }
  return out;
}

bool NodeGpus::Read(const std::string& uuid, GpuMemory* out) const {
  for (GpuMemory& g : Read()) {
    if (g.uuid == uuid) {
      *out = g;
      return true;
    }
  }
  return false;
}

std::vector<GpuModel> NodeGpus::Models() const {
  std::vector<GpuModel> out;
  for (const GpuMemory& m : Read()) {
    GpuModel g{m};
    nvmlDevice_t d = nullptr;
    if (REAL_NVML_CALL(nvmlDeviceGetHandleByIndex_v2, static_cast<unsigned>(m.index), &d) ==
        NVML_SUCCESS) {
      char name[96] = {};
      if (REAL_NVML_CALL(nvmlDeviceGetName, d, name, sizeof name) == NVML_SUCCESS) g.product = name;
      if (REAL_NVML_CALL(nvmlDeviceGetCudaComputeCapability, d, &g.cc_major, &g.cc_minor) !=
          NVML_SUCCESS) {
        g.cc_major = g.cc_minor = 0;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace vgpu::driver
