#include "intercept/device_map.h"

#include <strings.h>

#include <cstdio>
#include <cstdlib>

#include "driver/real_driver.h"

namespace vgpu {

std::string FormatUuid(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

CUresult ReadDriverUuids(std::vector<std::string>* out) {
  int n = 0;
  if (CUresult r = REAL_CALL(cuDeviceGetCount, &n); r != CUDA_SUCCESS) return r;
  out->assign(static_cast<size_t>(n), "");
  for (int p = 0; p < n; ++p) {
    CUuuid u{};
    if (CUresult r = REAL_CALL(cuDeviceGetUuid_v2, &u, p); r != CUDA_SUCCESS) return r;
    (*out)[static_cast<size_t>(p)] = FormatUuid(u);
  }
  return CUDA_SUCCESS;
}

Status DeviceMap::Build(const std::vector<std::string>& all,
                        const std::vector<std::string>& visible, bool visible_set) {
  const int n = static_cast<int>(all.size());
  physical_.clear();
  if (!visible_set) {
    for (int p = 0; p < n; ++p) physical_.push_back(p);
  }
  for (const std::string& item : visible) {
    int p = -1;
    if (strncasecmp(item.c_str(), "GPU-", 4) == 0) {
      for (int i = 0; i < n; ++i) {
        if (strcasecmp(all[static_cast<size_t>(i)].c_str(), item.c_str()) == 0) p = i;
      }
    } else {
      char* end = nullptr;
      long v = std::strtol(item.c_str(), &end, 10);
      if (*end == '\0' && v >= 0 && v < n) p = static_cast<int>(v);
    }
    if (p < 0) {
      return Status::Error(ErrorCode::kInval, "VGPU_VISIBLE_DEVICES names '" + item +
                                                  "', which is not one of the " +
                                                  std::to_string(n) + " devices of this node");
    }
    physical_.push_back(p);
  }
  virtual_.assign(static_cast<size_t>(n), -1);
  uuids_.clear();
  identity_ = static_cast<int>(physical_.size()) == n;
  for (size_t v = 0; v < physical_.size(); ++v) {
    virtual_[static_cast<size_t>(physical_[v])] = static_cast<int>(v);
    uuids_.push_back(all[static_cast<size_t>(physical_[v])]);
    identity_ = identity_ && physical_[v] == static_cast<int>(v);
  }
  return Status::Ok();
}

}  // namespace vgpu
