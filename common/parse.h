// The one set of value parsers behind every way a value reaches vgpu: libvgpu's
// option table (common/config), vgpud's flags and config keys, vgpuctl's
// options and the simulator's variables. One parser per kind of value, so that
// "30%" or "on" means the same to each of them. Byte sizes are in byte_size.h.
// Each returns false, leaving *out alone, on anything it does not accept; the
// caller names the variable, key or flag in its message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace vgpu {

// Digits only ("0", "42", "007"), no sign, no white space, within [min, max].
bool ParseInteger(std::string_view text, int64_t min, int64_t max, int64_t* out);

// A percentage, any value at least 0: "30", "12.5", "150%" (spaces and tabs
// around it allowed). Digits and one '.' only.
bool ParsePercent(std::string_view text, double* percent);

// A percentage above 0 and at most 100 as permille: "30", "12.5", "30%" (spaces
// and tabs around it allowed). Digits and one '.' only: no sign, exponent, hex or
// "inf", which nobody writes as a share.
bool ParseSharePermille(std::string_view text, uint32_t* permille);

// A compute weight (VGPU_COMPUTE_WEIGHT, vgpuctl set --weight): an integer
// from 1 to kMaxComputeWeight, digits only (spaces and tabs around them allowed).
inline constexpr uint32_t kMaxComputeWeight = 1000;
bool ParseComputeWeight(std::string_view text, uint32_t* weight);

// 300 -> "30%", 125 -> "12.5%": a share as users write it.
std::string FormatPercent(uint32_t permille);

// on/off, 1/0, true/false, any case, spaces and tabs around it allowed.
bool ParseSwitch(std::string_view text, bool* out);

// A duration in milliseconds: "30s", "500ms", "2m", "1h", "1.5s"; a bare number
// is seconds. At most one '.', no sign.
bool ParseDuration(std::string_view text, int64_t* ms);

// A device index as written in a list ("0", "15"): canonical decimal 0..max,
// no sign, no leading zeros.
bool ParseDeviceIndex(std::string_view text, int max, int* out);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case) -> "GPU-" + lower case.
bool ParseGpuUuid(std::string_view text, std::string* out);

}  // namespace vgpu
