// The value parsers of the option table (options.cc) and the text helpers they
// share with the loaders (config.cc, config_file.cc): generic values (sizes,
// percentages, switches, paths, device indices) and the one-line messages that
// name the variable or key. Internal to vgpu_config; callers use config.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace vgpu::config_internal {

// One value of one option, from the environment or from the JSON file.
struct Input {
  std::string source;              // "VGPU_GROUP" or "/etc/vgpu.json: group"
  std::string text;                // the value as written (JSON arrays: joined)
  std::vector<std::string> items;  // list options: the comma-separated items
};

// A value fit for a one-line message: control characters escaped, truncated.
std::string Printable(const std::string& s, size_t max_chars = 120);

// kInval with "<source>='<value>' <problem>".
Status Fail(const Input& in, const std::string& problem);

// As Fail, naming the offending item when the value is a list of several.
Status FailItem(const Input& in, const std::string& item, const std::string& problem);

std::string Trim(const std::string& s);
// "" -> {}; "a, b" -> {"a", "b"}; "a,,b" -> {"a", "", "b"}.
std::vector<std::string> SplitList(const std::string& s);
std::string Lower(std::string s);
bool IsDigits(const std::string& s);
bool HasControlChar(const std::string& s);

// Canonical decimal 0..max ("0", "15"); no sign, no leading zeros.
bool ParseIndex(const std::string& s, int max, int* out);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case) -> "GPU-" + lower-case.
bool ParseUuid(const std::string& s, std::string* out);

inline constexpr const char* kSizeExpected = "expected e.g. 8GiB, 512MiB, 1g or a byte count";

// A byte size (8GiB, 512MiB, 1g, a count) usable as a memory limit: not 0.
Status ParseLimit(const Input& in, const std::string& item, uint64_t* out);

// A percentage (0 < pct <= 100, "%" allowed) as permille; 0: no cap (HAMi's
// CUDA_DEVICE_SM_LIMIT* read 0 and >= 100 that way).
Status ParseSharePermille(const Input& in, uint32_t* permille);

// on/off, 1/0, true/false (any case).
Status ParseSwitch(const Input& in, bool* out);

// A non-empty path without control characters.
Status ParsePath(const Input& in, std::string* out);

// As ParsePath, but empty means the default (clears *out).
Status ParseOptionalDir(const Input& in, std::string* out);

// Sets device `index`'s value in a list kept sorted by index.
template <typename T>
void SetForIndex(std::vector<std::pair<int, T>>* by_index, int index, T v) {
  auto it = std::find_if(by_index->begin(), by_index->end(),
                         [index](const auto& p) { return p.first >= index; });
  if (it != by_index->end() && it->first == index) {
    it->second = v;
  } else {
    by_index->insert(it, {index, v});
  }
}

}  // namespace vgpu::config_internal
