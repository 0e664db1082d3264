#include "common/byte_size.h"

#include <cctype>
#include <cstdio>

namespace vgpu {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Power of 1024 for a unit suffix, -1 if it is not one.
int UnitShift(std::string_view unit) {
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (u.empty() || u == "b") return 0;
  static constexpr const char* kPrefixes = "kmgtp";
  for (int i = 0; kPrefixes[i] != '\0'; ++i) {
    std::string p(1, kPrefixes[i]);
    if (u == p || u == p + "b" || u == p + "ib") return 10 * (i + 1);
  }
  return -1;
}

}  // namespace

bool ParseByteSize(std::string_view text, uint64_t* out) {
  text = Trim(text);
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return false;
  int shift = UnitShift(Trim(text.substr(i)));
  if (shift < 0) return false;
  if (shift > 0 && value > (UINT64_MAX >> shift)) return false;
  *out = value << shift;
  return true;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (unit < 5 && bytes >= (1ull << (10 * (unit + 1))) &&
         bytes % (1ull << (10 * (unit + 1))) == 0) {
    ++unit;
  }
  char buf[48];
  if (unit > 0 || bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu %s",
                  static_cast<unsigned long long>(bytes >> (10 * unit)), kUnits[unit]);
    return buf;
  }
  int big = 0;
  while (big < 5 && bytes >= (1ull << (10 * (big + 1)))) ++big;
  std::snprintf(buf, sizeof buf, "%.1f %s",
                static_cast<double>(bytes) / static_cast<double>(1ull << (10 * big)), kUnits[big]);
  return buf;
}

}  // namespace vgpu
