// The three ways a process's code names a device, as distinct types so that
// passing one where another is meant does not compile:
//   VisibleIndex   what the application sees and names: 0..n-1 in the order
//                  of VGPU_VISIBLE_DEVICES (the agent's "device" too);
//   DriverOrdinal  what the real driver calls the same device (CUdevice);
//   NodeIndex      the node-wide device the quota ledger and the scheduler
//                  region are indexed by, which a migration can change
//                  behind a driver ordinal (node_devices.h).
// DeviceMap converts visible <-> ordinal, node_devices.h ordinal <-> node.
// Each is an int underneath (no cost on the hot paths); -1 is "none".
#pragma once

namespace vgpu {

template <typename Space>
class DeviceIndex {
 public:
  constexpr DeviceIndex() = default;
  constexpr explicit DeviceIndex(int value) : value_(value) {}
  constexpr int value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  friend constexpr bool operator==(DeviceIndex, DeviceIndex) = default;

 private:
  int value_ = -1;
};

using VisibleIndex = DeviceIndex<struct VisibleSpace>;
using DriverOrdinal = DeviceIndex<struct DriverOrdinalSpace>;
using NodeIndex = DeviceIndex<struct NodeSpace>;

}  // namespace vgpu
