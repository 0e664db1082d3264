#include "common/parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace vgpu {
namespace {

// Spaces and tabs only: a newline or another control character in a value is
// a mistake (a pasted line, a broken unit file), refused rather than dropped.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Digits with at most one '.' and at least one digit ("30", "12.5"): strtod
// alone would also take a sign, hex, exponents and "inf".
bool ParsePlainDecimal(std::string_view s, double* out) {
  size_t digits = 0;
  size_t dots = 0;
  for (char c : s) {
    if (IsDigit(c)) {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else {
      return false;
    }
  }
  if (digits == 0 || dots > 1 || s.size() > 32) return false;
  *out = std::strtod(std::string(s).c_str(), nullptr);
  return true;
}

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

}  // namespace

bool ParseInteger(std::string_view text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), IsDigit)) return false;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParsePercent(std::string_view text, double* percent) {
  std::string_view v = Trim(text);
  if (!v.empty() && v.back() == '%') v.remove_suffix(1);
  return ParsePlainDecimal(v, percent);
}

bool ParseSharePermille(std::string_view text, uint32_t* permille) {
  double pct = 0;
  if (!ParsePercent(text, &pct) || !(pct > 0 && pct <= 100)) return false;
  *permille = std::max<uint32_t>(1, static_cast<uint32_t>(pct * 10 + 0.5));
  return true;
}

bool ParseComputeWeight(std::string_view text, uint32_t* weight) {
  int64_t v = 0;
  if (!ParseInteger(Trim(text), 1, kMaxComputeWeight, &v)) return false;
  *weight = static_cast<uint32_t>(v);
  return true;
}

std::string FormatPercent(uint32_t permille) {
  std::string s = std::to_string(permille / 10);
  if (permille % 10 != 0) s += "." + std::to_string(permille % 10);
  return s + "%";
}

bool ParseSwitch(std::string_view text, bool* out) {
  std::string v = Lower(Trim(text));
  if (v == "on" || v == "1" || v == "true") {
    *out = true;
  } else if (v == "off" || v == "0" || v == "false") {
    *out = false;
  } else {
    return false;
  }
  return true;
}

bool ParseDuration(std::string_view text, int64_t* ms) {
  size_t i = 0;
  while (i < text.size() && (IsDigit(text[i]) || text[i] == '.')) ++i;
  double v = 0;
  if (i > 12 || !ParsePlainDecimal(text.substr(0, i), &v)) return false;
  std::string_view unit = text.substr(i);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60000;
  } else if (unit == "h") {
    scale = 3600000;
  } else {
    return false;
  }
  *ms = static_cast<int64_t>(v * scale);
  return true;
}

bool ParseDeviceIndex(std::string_view text, int max, int* out) {
  if (text.empty() || text.size() > 3 || (text.size() > 1 && text[0] == '0')) return false;
  int64_t v = 0;
  if (!ParseInteger(text, 0, max, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseGpuUuid(std::string_view text, std::string* out) {
  if (text.size() != 40 || Lower(text.substr(0, 4)) != "gpu-") return false;
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 4;
  for (size_t i = 0; i < 5; ++i) {
    if (!IsHex(text.substr(pos, kGroups[i]))) return false;
    pos += kGroups[i];
    if (i < 4 && text[pos++] != '-') return false;
  }
  *out = "GPU-" + Lower(text.substr(4));
  return true;
}

}  // namespace vgpu
