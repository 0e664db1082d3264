#include "common/config/value_parsers.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/byte_size.h"

namespace vgpu::config_internal {

std::string Printable(const std::string& s, size_t max_chars) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max_chars) return out + "...";
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

bool Fail(const Input& in, const std::string& problem, std::string* error) {
  *error = in.source + "='" + Printable(in.text) + "' " + problem;
  return false;
}

bool FailItem(const Input& in, const std::string& item, const std::string& problem,
              std::string* error) {
  if (in.items.size() <= 1) return Fail(in, problem, error);
  return Fail(in, "has item '" + Printable(item) + "' that " + problem, error);
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  if (Trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(Trim(s.substr(start, comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ParseIndex(const std::string& s, int max, int* out) {
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

namespace {

bool IsHex(const std::string& s, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// Digits with at most one '.', at least one digit ("30", "12.5"). strtod alone
// would also take a sign, hex ("0x1e"), exponents ("1e2") and "inf", which
// nobody writes as a percentage: such a value is a mistake, not a share.
bool IsPlainDecimal(const std::string& s) {
  size_t digits = 0;
  size_t dots = 0;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else {
      return false;
    }
  }
  return digits > 0 && dots <= 1;
}

}  // namespace

bool ParseUuid(const std::string& s, std::string* out) {
  if (s.size() != 40 || Lower(s.substr(0, 4)) != "gpu-") return false;
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 4;
  for (size_t i = 0; i < 5; ++i) {
    if (!IsHex(s, pos, kGroups[i])) return false;
    pos += kGroups[i];
    if (i < 4 && s[pos++] != '-') return false;
  }
  *out = "GPU-" + Lower(s.substr(4));
  return true;
}

bool ParseLimit(const Input& in, const std::string& item, uint64_t* out, std::string* error) {
  if (!ParseByteSize(item, out)) {
    return FailItem(in, item, std::string("is not a size: ") + kSizeExpected, error);
  }
  if (*out == 0) {
    return FailItem(in, item,
                    "is not a usable limit: 0 bytes would fail every allocation (unset the "
                    "variable for no limit)",
                    error);
  }
  return true;
}

bool ParseSharePermille(const Input& in, uint32_t* permille, std::string* error) {
  std::string v = Trim(in.text);
  if (!v.empty() && v.back() == '%') v.pop_back();
  double pct = IsPlainDecimal(v) ? std::strtod(v.c_str(), nullptr) : -1;
  // HAMi-core reads 0 and anything at or above 100 in its variables
  // (CUDA_DEVICE_SM_LIMIT and CUDA_DEVICE_SM_LIMIT_<i>) as "no limit"; a HAMi
  // deployment moved over keeps its meaning.
  if (in.source.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0 && (pct == 0 || pct >= 100)) {
    *permille = 0;
    return true;
  }
  if (!(pct > 0 && pct <= 100)) {
    return Fail(in, "is not a share: expected a percentage above 0 and at most 100, e.g. 30",
                error);
  }
  *permille = std::max<uint32_t>(1, static_cast<uint32_t>(pct * 10 + 0.5));
  return true;
}

bool ParseSwitch(const Input& in, bool* out, std::string* error) {
  std::string v = Lower(Trim(in.text));
  if (v == "on" || v == "1" || v == "true") {
    *out = true;
  } else if (v == "off" || v == "0" || v == "false") {
    *out = false;
  } else {
    return Fail(in, "is not a switch: expected on or off", error);
  }
  return true;
}

bool ParsePath(const Input& in, std::string* out, std::string* error) {
  if (in.text.empty()) return Fail(in, "is empty: expected a file path", error);
  if (HasControlChar(in.text)) return Fail(in, "contains control characters", error);
  *out = in.text;
  return true;
}

// An empty value means the default, as it did before these joined the table:
// a unit file that writes VGPU_RUN_DIR= must not make libvgpu fail closed.
bool ParseOptionalDir(const Input& in, std::string* out, std::string* error) {
  if (in.text.empty()) {
    out->clear();
    return true;
  }
  return ParsePath(in, out, error);
}

}  // namespace vgpu::config_internal
