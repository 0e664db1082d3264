#include "sim/node/sim_config.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "common/byte_size.h"
#include "common/parse.h"

namespace vgpu::sim {
namespace {

constexpr const char* kDefaultDevices = "2x16GiB";
constexpr int kMaxDeviceCount = 16;

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// The simulator's numbers read as everywhere else in vgpu (common/parse.h).
bool ParseUint(const std::string& s, uint64_t* out) {
  int64_t v = 0;
  if (!ParseInteger(s, 0, INT64_MAX, &v)) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

// One option of a device group: sm=132, cc=9.0, bw=3350 (GB/s of device
// memory), ckpt=2300 and restore=5970 (MB/s of the checkpoint API's copies).
bool ParseOption(const std::string& opt, DeviceSpec* spec) {
  auto eq = opt.find('=');
  if (eq == std::string::npos) return false;
  std::string key = opt.substr(0, eq), value = opt.substr(eq + 1);
  uint64_t n = 0;
  if (key == "sm") {
    if (!ParseUint(value, &n) || n == 0 || n > 1024) return false;
    spec->sm_count = static_cast<int>(n);
    return true;
  }
  if (key == "bw") {
    if (!ParseUint(value, &n) || n == 0 || n > 1'000'000) return false;
    spec->mem_bandwidth_bytes_per_s = n * 1'000'000'000ull;
    return true;
  }
  if (key == "ckpt" || key == "restore") {
    if (!ParseUint(value, &n) || n == 0 || n > 10'000'000) return false;
    (key == "ckpt" ? spec->checkpoint_bytes_per_s : spec->restore_bytes_per_s) = n * 1'000'000ull;
    return true;
  }
  if (key == "cc") {
    auto dot = value.find('.');
    uint64_t major = 0, minor = 0;
    if (dot == std::string::npos || !ParseUint(value.substr(0, dot), &major) ||
        !ParseUint(value.substr(dot + 1), &minor) || major < 3 || major > 12 || minor > 9) {
      return false;
    }
    spec->cc_major = static_cast<int>(major);
    spec->cc_minor = static_cast<int>(minor);
    return true;
  }
  return false;
}

// "[Nx]SIZE[:opt=value...]"
bool ParseGroup(const std::string& group, std::vector<DeviceSpec>* out) {
  auto parts = Split(group, ':');
  if (parts.empty()) return false;
  std::string head = parts[0];
  uint64_t count = 1;
  auto x = head.find('x');
  if (x != std::string::npos) {
    if (!ParseUint(head.substr(0, x), &count) || count == 0) return false;
    head = head.substr(x + 1);
  }
  DeviceSpec spec;
  if (!ParseByteSize(head, &spec.total_bytes) || spec.total_bytes < (64ull << 20) ||
      spec.total_bytes > (1ull << 44)) {
    return false;
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (!ParseOption(parts[i], &spec)) return false;
  }
  if (out->size() + count > kMaxDeviceCount) return false;
  out->insert(out->end(), count, spec);
  return true;
}

}  // namespace

bool ParseDevicesSpec(const std::string& text, std::vector<DeviceSpec>* out, std::string* error) {
  out->clear();
  bool ok = !text.empty();
  for (const auto& group : Split(text, ',')) {
    if (!ok) break;
    ok = ParseGroup(group, out);
  }
  if (!ok || out->empty()) {
    *error = "VGPU_SIM_DEVICES='" + text +
             "' is malformed: expected e.g. '4x16GiB' or '2x80GiB:sm=132:cc=9.0,1x24GiB' "
             "(1 to 16 devices of 64 MiB to 16 TiB)";
    return false;
  }
  return true;
}

bool LoadSimConfig(SimConfig* out, std::string* error) {
  const char* devices = std::getenv("VGPU_SIM_DEVICES");
  out->devices_spec = devices != nullptr ? devices : kDefaultDevices;
  if (!ParseDevicesSpec(out->devices_spec, &out->devices, error)) return false;

  if (const char* node = std::getenv("VGPU_SIM_NODE"); node != nullptr) {
    std::string name = node;
    bool valid = !name.empty() && name.size() <= 200;
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.';
      valid = valid && ok;
    }
    if (!valid) {
      *error = "VGPU_SIM_NODE='" + name +
               "' is malformed: use 1-200 characters from [A-Za-z0-9._-]";
      return false;
    }
    out->node_name = name;
  }
  out->kernel_libraries.clear();
  if (const char* libs = std::getenv("VGPU_SIM_KERNELS"); libs != nullptr) {
    for (const auto& p : Split(libs, ':')) {
      if (!p.empty()) out->kernel_libraries.push_back(p);
    }
  }
  const char* faults = std::getenv("VGPU_SIM_FAULTS");
  out->faults = faults != nullptr ? faults : "";
  const char* p2p = std::getenv("VGPU_SIM_P2P");
  return ParseP2pSpec(p2p != nullptr ? p2p : "none", static_cast<int>(out->devices.size()), &out->p2p,
                      error);
}

bool ParseP2pSpec(const std::string& text, int device_count, std::vector<std::pair<int, int>>* out,
                  std::string* error) {
  out->clear();
  if (text == "none") return true;
  const bool empty_part = text.empty() || text.front() == ',' || text.back() == ',' ||
                          text.find(",,") != std::string::npos;
  if (text == "all") {
    for (int a = 0; a < device_count; ++a) {
      for (int b = a + 1; b < device_count; ++b) out->emplace_back(a, b);
    }
    return true;
  }
  for (const auto& pair : Split(text, ',')) {
    if (empty_part) break;
    auto dash = pair.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string::npos || !ParseUint(pair.substr(0, dash), &a) ||
        !ParseUint(pair.substr(dash + 1), &b) || a == b || a >= static_cast<uint64_t>(device_count) ||
        b >= static_cast<uint64_t>(device_count)) {
      *error = "VGPU_SIM_P2P='" + text +
               "' is malformed: expected 'none', 'all' or pairs of distinct device indices such as "
               "'0-1,2-3'";
      out->clear();
      return false;
    }
    out->emplace_back(static_cast<int>(a), static_cast<int>(b));
  }
  if (empty_part) {
    *error = "VGPU_SIM_P2P='" + text + "' is malformed: an empty pair";
    return false;
  }
  return true;
}

bool SimConfig::PeerAccess(int a, int b) const {
  for (const auto& [x, y] : p2p) {
    if ((x == a && y == b) || (x == b && y == a)) return true;
  }
  return false;
}

}  // namespace vgpu::sim
