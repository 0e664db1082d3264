// A DeviceQuota (quota/allocation_accounting.h) in plain memory for the unit
// tests of what charges it: a limit per device, and a release of more than
// was reserved fails the test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "quota/allocation_accounting.h"

namespace vgpu::testing_fakes {

class FakeQuota : public DeviceQuota {
 public:
  explicit FakeQuota(uint64_t limit) : limit_(limit) {}
  bool TryReserve(int device, uint64_t bytes) override {
    if (used_[device] + bytes > limit_) return false;
    used_[device] += bytes;
    return true;
  }
  void Release(int device, uint64_t bytes) override {
    EXPECT_GE(used_[device], bytes) << "released more than was reserved";
    used_[device] -= bytes < used_[device] ? bytes : used_[device];
  }
  uint64_t Limit(int) const override { return limit_; }
  uint64_t Used(int device) const override {
    auto it = used_.find(device);
    return it == used_.end() ? 0 : it->second;
  }

 private:
  uint64_t limit_;
  std::map<int, uint64_t> used_;
};

}  // namespace vgpu::testing_fakes
