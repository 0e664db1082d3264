#include "common/config/value_parsers.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/byte_size.h"
#include "common/parse.h"

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

Status Fail(const Input& in, const std::string& problem) {
  return Status::Error(ErrorCode::kInval, in.source + "='" + Printable(in.text) + "' " + problem);
}

Status FailItem(const Input& in, const std::string& item, const std::string& problem) {
  if (in.items.size() <= 1) return Fail(in, problem);
  return Fail(in, "has item '" + Printable(item) + "' that " + problem);
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

bool ParseIndex(const std::string& s, int max, int* out) { return ParseDeviceIndex(s, max, out); }

bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

bool ParseUuid(const std::string& s, std::string* out) { return ParseGpuUuid(s, out); }

Status ParseLimit(const Input& in, const std::string& item, uint64_t* out) {
  if (!ParseByteSize(item, out)) {
    return FailItem(in, item, std::string("is not a size: ") + kSizeExpected);
  }
  if (*out == 0) {
    return FailItem(in, item,
                    "is not a usable limit: 0 bytes would fail every allocation (unset the "
                    "variable for no limit)");
  }
  return Status::Ok();
}

namespace {

// 0 or at least 100 ("0", "100", "150.5%"): no limit to HAMi-core.
bool IsHamiNoLimit(const std::string& text) {
  double pct = 0;
  return ParsePercent(text, &pct) && (pct == 0 || pct >= 100);
}

}  // namespace

Status ParseSharePermille(const Input& in, uint32_t* permille) {
  // HAMi-core reads 0 and anything at or above 100 in its variables
  // (CUDA_DEVICE_SM_LIMIT and CUDA_DEVICE_SM_LIMIT_<i>) as "no limit"; a HAMi
  // deployment moved over keeps its meaning.
  if (in.source.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0 && IsHamiNoLimit(in.text)) {
    *permille = 0;
    return Status::Ok();
  }
  if (!vgpu::ParseSharePermille(in.text, permille)) {
    return Fail(in, "is not a share: expected a percentage above 0 and at most 100, e.g. 30");
  }
  return Status::Ok();
}

Status ParseSwitch(const Input& in, bool* out) {
  if (!vgpu::ParseSwitch(in.text, out)) return Fail(in, "is not a switch: expected on or off");
  return Status::Ok();
}

Status ParsePath(const Input& in, std::string* out) {
  if (in.text.empty()) return Fail(in, "is empty: expected a file path");
  if (HasControlChar(in.text)) return Fail(in, "contains control characters");
  *out = in.text;
  return Status::Ok();
}

// An empty value means the default, as it did before these joined the table:
// a unit file that writes VGPU_RUN_DIR= must not make libvgpu fail closed.
Status ParseOptionalDir(const Input& in, std::string* out) {
  if (in.text.empty()) {
    out->clear();
    return Status::Ok();
  }
  return ParsePath(in, out);
}

}  // namespace vgpu::config_internal
