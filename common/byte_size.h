// Byte sizes as users write them in environment variables and config files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace vgpu {

// Accepts a non-negative integer with an optional binary unit, case-insensitive:
// "1073741824", "512MiB", "512m", "8GiB", "8G", "1g", "64KB", "2TiB". Every
// unit is a power of 1024 (HAMi-core and nvidia-smi read "1g" and "1GB" as
// GiB too). Whitespace around the value is allowed. Returns false on anything
// else, including overflow past 2^64-1.
bool ParseByteSize(std::string_view text, uint64_t* out);

// "16 GiB", "512 MiB", "1536 B": the largest unit that divides exactly, else
// one decimal place of the largest unit below the value.
std::string FormatByteSize(uint64_t bytes);

}  // namespace vgpu
