// Events: a marker in a stream that records the device clock when reached.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>

namespace vgpu::sim {

class Stream;
struct Context;

struct Event {
  Context* ctx = nullptr;
  unsigned flags = 0;
  std::mutex mu;              // guards the record fields below as a unit
  Stream* stream = nullptr;   // of the latest record; nullptr: never recorded
  uint64_t seq = 0;           // done when stream->completed() >= seq
  uint64_t gen = 0;           // record generation
  std::atomic<uint64_t> time_ns{0};
  std::atomic<uint64_t> time_gen{0};
  bool captured = false;      // recorded into a stream capture
};

bool IsLiveEvent(Event* e);
void RegisterEvent(Event* e);
void UnregisterEvent(Event* e);
// Marks the event reached (runs on the stream worker).
// `at_ns`: when the device reached the record (on the stream's timeline).
void EventReached(Event* e, uint64_t gen, uint64_t at_ns);

}  // namespace vgpu::sim
