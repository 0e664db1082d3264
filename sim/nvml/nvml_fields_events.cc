// nvmlDeviceGetFieldValues (the batch query DCGM and pynvml monitors use)
// and the event API of the simulated libnvidia-ml.so.1. Fields answer from
// the same model as the individual queries; events never occur on the
// simulated node (no ECC errors, Xids, P-state or clock changes), so a wait
// times out, as a healthy GPU's does.
#include <time.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "driver/nvml_abi.h"
#include "sim/nvml/nvml_abi_ext.h"
#include "sim/nvml/nvml_board.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

long long RealtimeUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

void SetUint(nvmlFieldValue_t* v, unsigned int value) {
  v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
  v->value.uiVal = value;
}

void SetUll(nvmlFieldValue_t* v, unsigned long long value) {
  v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
  v->value.ullVal = value;
}

// One field of device d. Fields the sim does not model get
// NVML_ERROR_NOT_SUPPORTED in their own nvmlReturn, as NVML reports a field
// a board lacks; the call as a whole still succeeds.
void ReadField(int d, nvmlFieldValue_t* v) {
  const DeviceState& dev = Node()->device(d);
  const BoardProfile& p = Profile(dev);
  v->nvmlReturn = NVML_SUCCESS;
  switch (v->fieldId) {
    case NVML_FI_DEV_ECC_CURRENT:
    case NVML_FI_DEV_ECC_PENDING:
      SetUint(v, 1);  // ECC on (nvmlDeviceGetEccMode)
      break;
    case NVML_FI_DEV_ECC_SBE_VOL_TOTAL:
    case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
    case NVML_FI_DEV_ECC_SBE_AGG_TOTAL:
    case NVML_FI_DEV_ECC_DBE_AGG_TOTAL:
      SetUll(v, 0);
      break;
    case NVML_FI_DEV_MEMORY_TEMP:
      SetUint(v, MemoryTemperatureC(d));
      break;
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
    case NVML_FI_DEV_ENERGY:
      SetUll(v, EnergyMj(d));
      break;
    case NVML_FI_DEV_NVLINK_LINK_COUNT:
      SetUint(v, NvlinkCount(d));  // as nvmlDeviceGetNvLinkState
      break;
    case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
    case NVML_FI_DEV_REMAPPED_COR:
    case NVML_FI_DEV_REMAPPED_UNC:
    case NVML_FI_DEV_REMAPPED_PENDING:
    case NVML_FI_DEV_REMAPPED_FAILURE:
      SetUint(v, 0);
      break;
    case NVML_FI_DEV_POWER_AVERAGE:
    case NVML_FI_DEV_POWER_INSTANT:
      // scopeId 0 is the GPU; 1 (module: Grace + GPU) does not exist here.
      if (v->scopeId != 0) {
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        break;
      }
      SetUint(v, PowerMw(d));
      break;
    case NVML_FI_DEV_POWER_MIN_LIMIT:
      SetUint(v, p.min_limit_mw);
      break;
    case NVML_FI_DEV_POWER_MAX_LIMIT:
    case NVML_FI_DEV_POWER_DEFAULT_LIMIT:
    case NVML_FI_DEV_POWER_CURRENT_LIMIT:
      SetUint(v, p.tdp_mw);
      break;
    default:
      v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  }
}

// Live event sets, so that a stale or foreign handle is refused rather than
// dereferenced. The sets hold nothing: no event is ever delivered.
std::mutex g_sets_mu;
std::set<nvmlEventSet_t>* g_sets = new std::set<nvmlEventSet_t>();

bool LiveSet(nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lock(g_sets_mu);
  return g_sets->count(set) != 0;
}

// What the simulated boards could report: ECC errors, P-state changes, Xid
// errors, and MIG configuration changes where MIG exists.
unsigned long long SupportedEvents(int d) {
  unsigned long long types = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |
                             nvmlEventTypePState | nvmlEventTypeXidCriticalError;
  if (Profile(Node()->device(d)).mig_capable) types |= nvmlEventMigConfigChange;
  return types;
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                  nvmlFieldValue_t* values) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (values == nullptr || valuesCount < 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < valuesCount; ++i) {
    nvmlFieldValue_t* v = &values[i];
    long long start = nv::RealtimeUs();
    nv::ReadField(d, v);
    v->timestamp = nv::RealtimeUs();
    v->latencyUsec = v->timestamp - start;
  }
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Any unique address serves as the handle; nothing is stored behind it.
  auto* handle = reinterpret_cast<nvmlEventSet_t>(new char);
  std::lock_guard<std::mutex> lock(nv::g_sets_mu);
  nv::g_sets->insert(handle);
  *set = handle;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(nv::g_sets_mu);
  if (nv::g_sets->erase(set) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  delete reinterpret_cast<char*>(set);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                          unsigned long long* eventTypes) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (eventTypes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = nv::SupportedEvents(d);
  return NVML_SUCCESS;
}

// Registering supported types succeeds (none will fire); asking for a type
// the board cannot report is NVML_ERROR_NOT_SUPPORTED, as documented.
NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                  unsigned long long eventTypes,
                                                  nvmlEventSet_t set) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (!nv::LiveSet(set)) return NVML_ERROR_INVALID_ARGUMENT;
  if ((eventTypes & ~nv::SupportedEvents(d)) != 0) return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

// No event ever arrives: waits the full timeout, then NVML_ERROR_TIMEOUT.
NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                             unsigned int timeoutms) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (data == nullptr || !nv::LiveSet(set)) return NVML_ERROR_INVALID_ARGUMENT;
  std::this_thread::sleep_for(std::chrono::milliseconds(timeoutms));
  return NVML_ERROR_TIMEOUT;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                          unsigned int timeoutms) {
  return nvmlEventSetWait_v2(set, data, timeoutms);
}
