// What this process holds against its quota, so that frees, context teardown
// and stream-ordered frees return exactly what was charged. Keys are the
// driver's pointers and handles, tagged by kind; an owner is the context the
// memory dies with (opaque here: quota/ knows no driver types).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace vgpu {

enum class ChargeKind : uint8_t { kPointer, kVmmHandle, kArray, kMipmappedArray };

struct Charge {
  uint64_t bytes = 0;
  int device = 0;               // physical ordinal
  const void* owner = nullptr;  // the CUcontext, or nullptr (outlives contexts)
};

class AllocationTracker {
 public:
  void Add(ChargeKind kind, uint64_t key, const Charge& c);
  // Removes and returns the charge; false if none is recorded.
  bool Take(ChargeKind kind, uint64_t key, Charge* out);
  // Removes every charge owned by `owner` (the driver frees them with it).
  std::vector<Charge> TakeOwner(const void* owner);
  void Clear();

 private:
  static uint64_t Key(ChargeKind kind, uint64_t key) {
    return key ^ (static_cast<uint64_t>(kind) << 62);
  }
  std::mutex mu_;
  std::unordered_map<uint64_t, Charge> charges_;
};

}  // namespace vgpu
