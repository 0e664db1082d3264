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

// One key space for every kind: the driver's pointer or handle, tagged by its
// kind in the top bits (the tracker, call-site tracing and libvgpu's
// non-migratable book all key by it).
inline uint64_t TaggedKey(ChargeKind kind, uint64_t key) {
  return key ^ (static_cast<uint64_t>(kind) << 62);
}

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
  std::mutex mu_;
  std::unordered_map<uint64_t, Charge> charges_;
};

}  // namespace vgpu
