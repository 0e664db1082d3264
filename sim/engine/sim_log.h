// The simulator's diagnostics.
#pragma once

namespace vgpu::sim {

// Writes a one-line diagnostic to stderr (prefixed "vgpu-sim: "). Used for
// errors the issue wants explained (bad config, unknown kernel), never on a
// success path.
void SimLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace vgpu::sim
