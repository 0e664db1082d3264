// Visible device indices (what the process sees: 0..n-1 in the configured
// order) and driver ordinals (what the driver knows; device_index.h). Built once, after the
// real cuInit succeeded; immutable afterwards, so lookups take no lock.
#pragma once

#include <cuda.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/device_index.h"
#include "common/status.h"

namespace vgpu {

class DeviceMap {
 public:
  // Resolves VGPU_VISIBLE_DEVICES (indices or UUIDs, case-insensitive)
  // against the node's devices (`node_uuids`, by driver ordinal: what
  // ReadDriverUuids reads). Not set: every device, in the driver's order
  // (identity). kInval naming the item that is none of them.
  Status Build(const std::vector<std::string>& node_uuids, const std::vector<std::string>& visible,
               bool visible_set);

  int count() const { return static_cast<int>(physical_.size()); }
  bool identity() const { return identity_; }
  // The driver ordinal of visible device v; invalid if out of range.
  DriverOrdinal ToOrdinal(VisibleIndex v) const {
    return DriverOrdinal(v.valid() && v.value() < count() ? physical_[v.value()] : -1);
  }
  // The visible index of driver ordinal p; invalid if hidden.
  VisibleIndex ToVisible(DriverOrdinal p) const {
    return VisibleIndex(p.valid() && p.value() < static_cast<int>(virtual_.size())
                            ? virtual_[p.value()]
                            : -1);
  }
  // "GPU-..." form. A copy: a migration (SetUuid) may change it meanwhile.
  // "" for an invalid or out-of-range index.
  std::string uuid(VisibleIndex v) const {
    std::lock_guard<std::mutex> lock(uuid_mu_);
    return v.valid() && v.value() < static_cast<int>(uuids_.size()) ? uuids_[v.value()] : "";
  }
  // After a migration: visible device v is on another GPU now.
  void SetUuid(VisibleIndex v, const std::string& uuid) {
    std::lock_guard<std::mutex> lock(uuid_mu_);
    if (v.valid() && v.value() < static_cast<int>(uuids_.size())) uuids_[v.value()] = uuid;
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

// The UUID of every device the real driver lists, by driver ordinal (the
// driver-table edge: its error is the driver's).
CUresult ReadDriverUuids(std::vector<std::string>* out);

}  // namespace vgpu
