// NVML seen through the process's configuration: only visible devices exist,
// in the configured order, and memory is reported as the quota view, so that
// nvidia-smi inside a container shows the quota.
#include <strings.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "driver/real_driver.h"
#include "intercept/node_devices.h"
#include "intercept/nvml_view.h"
#include "intercept/hooks.h"
#include "intercept/runtime.h"
#include "vmm/vmm.h"

namespace vgpu {
namespace {

NvmlView& View() { return Runtime::Get().nvml_view(); }

nvmlReturn_t ResolveOne(const std::string& item, nvmlDevice_t* h) {
  if (strncasecmp(item.c_str(), "GPU-", 4) == 0) return REAL_NVML_CALL(nvmlDeviceGetHandleByUUID, item.c_str(), h);
  return REAL_NVML_CALL(nvmlDeviceGetHandleByIndex_v2, static_cast<unsigned>(std::stoul(item)), h);
}

// Builds the view after a successful real nvmlInit; sticky.
nvmlReturn_t BuildView() {
  std::lock_guard<std::mutex> lock(View().mu);
  NvmlView& v = View();
  if (v.status == NVML_SUCCESS) return v.status;
  const Config& cfg = Runtime::Get().config();
  if (!Runtime::Get().config_ok()) return v.status = NVML_ERROR_UNINITIALIZED;
  std::vector<std::string> items = cfg.visible_devices;
  if (!cfg.visible_devices_set) {
    unsigned n = 0;
    if (nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetCount_v2, &n); r != NVML_SUCCESS) return r;
    for (unsigned i = 0; i < n; ++i) items.push_back(std::to_string(i));
  }
  // A limit list that does not match the devices would read as a 0 limit and
  // lower the whole group's quota: fail closed, as cuInit does.
  if (Status s = cfg.ValidateAgainstDeviceCount(static_cast<int>(items.size())); !s.ok()) {
    ReportFatal(s.message);
    return v.status = NVML_ERROR_UNINITIALIZED;
  }
  v.handles.clear();
  v.physical.clear();
  std::vector<uint64_t> limits(kLedgerDevices, kUnlimited);
  for (size_t i = 0; i < items.size(); ++i) {
    nvmlDevice_t h = nullptr;
    unsigned idx = 0;
    if (ResolveOne(items[i], &h) != NVML_SUCCESS || REAL_NVML_CALL(nvmlDeviceGetIndex, h, &idx) != NVML_SUCCESS) {
      return v.status = NVML_ERROR_UNINITIALIZED;  // fail closed, like cuInit
    }
    v.handles.push_back(h);
    v.physical.push_back(static_cast<int>(idx));
    if (idx < kLedgerDevices) limits[idx] = cfg.LimitFor(static_cast<int>(i));
  }
  bool quota = !cfg.group.empty();
  for (uint64_t l : limits) quota = quota || l != kUnlimited;
  if (quota && Runtime::Get().ledger() == nullptr) {
    Result<std::unique_ptr<QuotaLedger>> opened = QuotaLedger::Open(cfg.group, limits);
    if (!opened.ok()) {
      ReportFatal(opened.status().message);
      return v.status = NVML_ERROR_UNINITIALIZED;
    }
    v.own_ledger = std::move(opened.value());
  }
  return v.status = NVML_SUCCESS;
}

}  // namespace

void FollowMigrationInNvmlView() {
  std::lock_guard<std::mutex> lock(View().mu);
  NvmlView& v = View();
  if (v.status != NVML_SUCCESS) return;  // built later, from the moved view
  const DeviceMap& devices = Runtime::Get().devices();
  for (size_t i = 0; i < v.handles.size() && static_cast<int>(i) < devices.count(); ++i) {
    const int node = NodeDevice(devices.ToOrdinal(VisibleIndex(static_cast<int>(i)))).value();
    nvmlDevice_t h = nullptr;
    if (REAL_NVML_CALL(nvmlDeviceGetHandleByIndex_v2, static_cast<unsigned>(node), &h) != NVML_SUCCESS) {
      continue;
    }
    // Word-sized stores read by unlocked NVML hooks: a query racing the move
    // answers for the old or the new GPU, both valid handles.
    v.handles[i] = h;
    v.physical[i] = node;
  }
}

namespace {

nvmlReturn_t AfterInit(nvmlReturn_t r) {
  if (r != NVML_SUCCESS) return r;
  View().init_count.fetch_add(1);
  return BuildView();
}

int VirtualIndexOf(nvmlDevice_t h) {
  const NvmlView& v = View();
  for (size_t i = 0; i < v.handles.size(); ++i) {
    if (v.handles[i] == h) return static_cast<int>(i);
  }
  return -1;
}

// By NVML index, which is the node device (not a driver ordinal).
QuotaLedger* Ledger() {
  DeviceLedger* l = Runtime::Get().ledger();
  return l != nullptr ? l->node() : View().own_ledger.get();
}

// Quota view of (total, used, free) for a visible device; false: no quota.
bool QuotaView(nvmlDevice_t h, unsigned long long* total, unsigned long long* used,
               unsigned long long* free) {
  int v = VirtualIndexOf(h);
  QuotaLedger* ledger = Ledger();
  if (v < 0 || ledger == nullptr) return false;
  int p = View().physical[static_cast<size_t>(v)];
  // As in cuMemGetInfo: this process's cached freed chunks are given back
  // first, so that its own view matches what it holds. NVML calls are not
  // gated: never wait here for a suspend in progress.
  Runtime::Get().vmm().TryTrimCache(p);
  uint64_t limit = ledger->Limit(p);
  if (limit == kUnlimited) return false;
  // The same view as cuMemGetInfo's: free is also bounded by the device's.
  MemoryView view = QuotaMemoryView(limit, ledger->Used(p), *total, *free);
  *total = view.total;
  *used = view.used;
  *free = view.free;
  return true;
}

// A hook's body once NVML is initialized (through us) and the view of the
// process's devices is built; NVML_ERROR_UNINITIALIZED before, as NVML
// answers. Exported functions never throw.
template <typename F>
nvmlReturn_t WhenNvmlReady(F&& body) noexcept {
  return NoThrow(NVML_ERROR_UNKNOWN, [&]() -> nvmlReturn_t {
    if (View().status != NVML_SUCCESS || View().init_count.load() <= 0)
      return NVML_ERROR_UNINITIALIZED;
    return body();
  });
}

}  // namespace
}  // namespace vgpu

using vgpu::View;

VGPU_HOOK(nvmlInit) nvmlReturn_t vgpu_hook_nvmlInit() {
  return vgpu::NoThrow(NVML_ERROR_UNKNOWN, [&]() -> nvmlReturn_t {
    if (REAL_NVML(nvmlInit) == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
    return vgpu::AfterInit(REAL_NVML_CALL(nvmlInit));
  });
}
VGPU_HOOK(nvmlInit_v2) nvmlReturn_t vgpu_hook_nvmlInit_v2() {
  return vgpu::NoThrow(NVML_ERROR_UNKNOWN, [&]() -> nvmlReturn_t {
    if (REAL_NVML(nvmlInit_v2) == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
    return vgpu::AfterInit(REAL_NVML_CALL(nvmlInit_v2));
  });
}
VGPU_HOOK(nvmlInitWithFlags) nvmlReturn_t vgpu_hook_nvmlInitWithFlags(unsigned int flags) {
  return vgpu::NoThrow(NVML_ERROR_UNKNOWN, [&]() -> nvmlReturn_t {
    if (REAL_NVML(nvmlInitWithFlags) == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
    return vgpu::AfterInit(REAL_NVML_CALL(nvmlInitWithFlags, flags));
  });
}

VGPU_HOOK(nvmlDeviceGetCount) nvmlReturn_t vgpu_hook_nvmlDeviceGetCount(unsigned int* count) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned>(View().handles.size());
    return NVML_SUCCESS;
  });
}
VGPU_HOOK(nvmlDeviceGetCount_v2) nvmlReturn_t vgpu_hook_nvmlDeviceGetCount_v2(unsigned int* count) {
  return vgpu_hook_nvmlDeviceGetCount(count);
}

VGPU_HOOK(nvmlDeviceGetHandleByIndex) nvmlReturn_t vgpu_hook_nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= View().handles.size()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = View().handles[index];
    return NVML_SUCCESS;
  });
}
VGPU_HOOK(nvmlDeviceGetHandleByIndex_v2) nvmlReturn_t vgpu_hook_nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return vgpu_hook_nvmlDeviceGetHandleByIndex(index, device);
}

VGPU_HOOK(nvmlDeviceGetHandleByUUID) nvmlReturn_t vgpu_hook_nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetHandleByUUID, uuid, device);
    if (r == NVML_SUCCESS && vgpu::VirtualIndexOf(*device) < 0) return NVML_ERROR_NOT_FOUND;
    return r;
  });
}
VGPU_HOOK(nvmlDeviceGetHandleByPciBusId) nvmlReturn_t vgpu_hook_nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetHandleByPciBusId, pciBusId, device);
    if (r == NVML_SUCCESS && vgpu::VirtualIndexOf(*device) < 0) return NVML_ERROR_NOT_FOUND;
    return r;
  });
}
VGPU_HOOK(nvmlDeviceGetHandleByPciBusId_v2) nvmlReturn_t vgpu_hook_nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetHandleByPciBusId_v2, pciBusId, device);
    if (r == NVML_SUCCESS && vgpu::VirtualIndexOf(*device) < 0) return NVML_ERROR_NOT_FOUND;
    return r;
  });
}

VGPU_HOOK(nvmlDeviceGetIndex) nvmlReturn_t vgpu_hook_nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    int v = vgpu::VirtualIndexOf(device);
    if (v < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *index = static_cast<unsigned>(v);
    return NVML_SUCCESS;
  });
}

VGPU_HOOK(nvmlDeviceGetMemoryInfo) nvmlReturn_t vgpu_hook_nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    if (vgpu::VirtualIndexOf(device) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetMemoryInfo, device, memory);
    if (r == NVML_SUCCESS) vgpu::QuotaView(device, &memory->total, &memory->used, &memory->free);
    return r;
  });
}
VGPU_HOOK(nvmlDeviceGetMemoryInfo_v2) nvmlReturn_t vgpu_hook_nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return vgpu::WhenNvmlReady([&]() -> nvmlReturn_t {
    if (vgpu::VirtualIndexOf(device) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = REAL_NVML_CALL(nvmlDeviceGetMemoryInfo_v2, device, memory);
    if (r == NVML_SUCCESS &&
        vgpu::QuotaView(device, &memory->total, &memory->used, &memory->free)) {
      memory->reserved = 0;
    }
    return r;
  });
}

VGPU_HOOK(nvmlShutdown) nvmlReturn_t vgpu_hook_nvmlShutdown() {
  return vgpu::NoThrow(NVML_ERROR_UNKNOWN, [&]() -> nvmlReturn_t {
    nvmlReturn_t r = REAL_NVML_CALL(nvmlShutdown);
    if (r == NVML_SUCCESS) vgpu::View().init_count.fetch_sub(1);
    return r;
  });
}
