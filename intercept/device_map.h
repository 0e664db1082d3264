// Virtual device ordinals (what the process sees: 0..n-1 in the configured
// order) and physical ones (what the driver knows). Built once, after the
// real cuInit succeeded; immutable afterwards, so lookups take no lock.
#pragma once

#include <cuda.h>

#include <mutex>
#include <string>
#include <vector>

namespace vgpu {

class DeviceMap {
 public:
  // Resolves VGPU_VISIBLE_DEVICES (indices or UUIDs) against the real driver.
  // Empty `visible`: every device, in the driver's order (identity).
  CUresult Build(const std::vector<std::string>& visible, bool visible_set, std::string* error);

  int count() const { return static_cast<int>(physical_.size()); }
  bool identity() const { return identity_; }
  // Physical ordinal of virtual ordinal v, -1 if out of range.
  int ToPhysical(int v) const { return v >= 0 && v < count() ? physical_[v] : -1; }
  // Virtual ordinal of physical ordinal p, -1 if hidden.
  int ToVirtual(int p) const {
    return p >= 0 && p < static_cast<int>(virtual_.size()) ? virtual_[p] : -1;
  }
  // "GPU-..." form. A copy: a migration (SetUuid) may change it meanwhile.
  std::string uuid(int v) const {
    std::lock_guard<std::mutex> lock(uuid_mu_);
    return uuids_[v];
  }
  // After a migration: virtual device v is on another GPU now.
  void SetUuid(int v, const std::string& uuid) {
    std::lock_guard<std::mutex> lock(uuid_mu_);
    uuids_[v] = uuid;
  }

 private:
  std::vector<int> physical_;
  std::vector<int> virtual_;
  std::vector<std::string> uuids_;
  mutable std::mutex uuid_mu_;
  bool identity_ = true;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" for a CUDA UUID.
std::string FormatUuid(const CUuuid& u);

}  // namespace vgpu
