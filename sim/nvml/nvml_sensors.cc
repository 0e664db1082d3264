// Sensor queries of the simulated libnvidia-ml.so.1: temperature, power,
// energy, clocks, performance state and fans, from the model in
// nvml_board.h (they follow the device's engine utilization).
#include "driver/nvml_abi.h"
#include "sim/nvml/nvml_abi_ext.h"
#include "sim/nvml/nvml_board.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

// Thresholds of an H100 SXM as nvidia-smi -q lists them; the same for every
// simulated board (the model never gets near them).
constexpr unsigned int kShutdownC = 92, kSlowdownC = 89, kGpuMaxC = 87, kMemMaxC = 95;

// Resolves a handle and checks the output pointer, the preamble of every query.
template <typename T>
nvmlReturn_t Begin(nvmlDevice_t device, T* out, int* index) {
  if (nvmlReturn_t r = Resolve(device, index); r != NVML_SUCCESS) return r;
  return out == nullptr ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

const BoardProfile& ProfileOf(int d) { return Profile(Node()->device(d)); }

// Clock of `type` at clock id `id`; NVML_ERROR_INVALID_ARGUMENT for an
// unknown type or id. Video clocks run at 90 % of the SM clocks (Hopper's
// 1980 MHz SM, ~1755 MHz video).
nvmlReturn_t Clock(int d, unsigned int type, unsigned int id, unsigned int* mhz) {
  const DeviceState& dev = Node()->device(d);
  const BoardProfile& p = Profile(dev);
  unsigned int sm = 0;
  switch (id) {
    case NVML_CLOCK_ID_CURRENT:
      sm = SmClockMhz(d);
      break;
    case NVML_CLOCK_ID_APP_CLOCK_TARGET:
    case NVML_CLOCK_ID_APP_CLOCK_DEFAULT:
      sm = p.app_sm_mhz;
      break;
    case NVML_CLOCK_ID_CUSTOMER_BOOST_MAX:
      sm = p.max_sm_mhz;
      break;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      *mhz = sm;
      return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
      *mhz = MemClockMhz(dev);  // HBM/GDDR run at one clock
      return NVML_SUCCESS;
    case NVML_CLOCK_VIDEO:
      *mhz = sm * 9 / 10;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                  nvmlTemperatureSensors_t sensorType,
                                                  unsigned int* temp) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, temp, &d); r != NVML_SUCCESS) return r;
  if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = nv::TemperatureC(d);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                                           nvmlTemperatureThresholds_t type,
                                                           unsigned int* temp) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, temp, &d); r != NVML_SUCCESS) return r;
  switch (type) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
      *temp = nv::kShutdownC;
      return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
      *temp = nv::kSlowdownC;
      return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
      *temp = nv::kMemMaxC;
      return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
      *temp = nv::kGpuMaxC;
      return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
    case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
    case NVML_TEMPERATURE_THRESHOLD_GPS_CURR:
      return NVML_ERROR_NOT_SUPPORTED;  // fanless data-center boards have no acoustic target
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

// Board power in mW over the last second.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, power, &d); r != NVML_SUCCESS) return r;
  *power = nv::PowerMw(d);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                             unsigned long long* energy) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, energy, &d); r != NVML_SUCCESS) return r;
  *energy = nv::EnergyMj(d);
  return NVML_SUCCESS;
}

// Power limits: the board's TDP is the default, current and enforced limit
// (the sim has no nvmlDeviceSetPowerManagementLimit).
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                           unsigned int* limit) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, limit, &d); r != NVML_SUCCESS) return r;
  *limit = nv::ProfileOf(d).tdp_mw;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                  unsigned int* defaultLimit) {
  return nvmlDeviceGetPowerManagementLimit(device, defaultLimit);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return nvmlDeviceGetPowerManagementLimit(device, limit);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                      unsigned int* minLimit,
                                                                      unsigned int* maxLimit) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, minLimit, &d); r != NVML_SUCCESS) return r;
  if (maxLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minLimit = nv::ProfileOf(d).min_limit_mw;
  *maxLimit = nv::ProfileOf(d).tdp_mw;
  return NVML_SUCCESS;
}

// Deprecated in NVML, still read by older monitors: always enabled on
// data-center boards.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device,
                                                          nvmlEnableState_t* mode) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, mode, &d); r != NVML_SUCCESS) return r;
  *mode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int* clock) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clock, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, type, NVML_CLOCK_ID_CURRENT, clock);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                   unsigned int* clock) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clock, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device,
                                                        nvmlClockType_t clockType,
                                                        unsigned int* clockMHz) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clockMHz, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, clockType, NVML_CLOCK_ID_APP_CLOCK_TARGET, clockMHz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
                                                               nvmlClockType_t clockType,
                                                               unsigned int* clockMHz) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clockMHz, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, clockType, NVML_CLOCK_ID_APP_CLOCK_DEFAULT, clockMHz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device,
                                                            nvmlClockType_t clockType,
                                                            unsigned int* clockMHz) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clockMHz, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, clockType, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clockMHz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType,
                                            nvmlClockId_t clockId, unsigned int* clockMHz) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clockMHz, &d); r != NVML_SUCCESS) return r;
  return nv::Clock(d, clockType, clockId, clockMHz);
}

// Data-center GPUs stay in P0 with a driver loaded; idling shows in the
// clocks and the power, not in the P-state.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t* pState) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, pState, &d); r != NVML_SUCCESS) return r;
  *pState = NVML_PSTATE_0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t* pState) {
  return nvmlDeviceGetPerformanceState(device, pState);
}

// Why the clocks are below maximum: only "idle" is modelled (no power or
// thermal capping, the model stays below both limits).
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t device, unsigned long long* clocksEventReasons) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, clocksEventReasons, &d); r != NVML_SUCCESS) return r;
  *clocksEventReasons =
      nv::Busy(d) > 0.0 ? nvmlClocksEventReasonNone : nvmlClocksEventReasonGpuIdle;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* clocksThrottleReasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

// The simulated boards are passively cooled SXM/data-center modules: the
// chassis fans belong to the server, so NVML has no fan to report (an H100
// SXM answers the same; nvidia-smi prints "N/A").
NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, speed, &d); r != NVML_SUCCESS) return r;
  return NVML_ERROR_NOT_SUPPORTED;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan,
                                                  unsigned int* speed) {
  (void)fan;
  return nvmlDeviceGetFanSpeed(device, speed);
}
