// The group's device-memory quota, for hooks outside intercept/hooks_memory.cc
// (which defines these): reserve before the driver takes memory, release after
// it gave memory back. Devices are physical ordinals.
#pragma once

#include <cstdint>

namespace vgpu {

// False (logged and counted as a refusal) if the quota cannot hold `bytes` more.
bool ChargeQuota(int device, uint64_t bytes);
void ReleaseQuota(int device, uint64_t bytes);

}  // namespace vgpu
