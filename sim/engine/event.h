// Events: a marker in a stream that records the device clock when reached.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>

namespace vgpu::sim {

class Stream;
struct Context;
struct IpcEventSlot;

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
  // Interprocess event: its shared slot (own, or another process's when opened
  // from a handle). Records are then tickets of the slot, and completion is
  // judged from the slot, not from `stream` and `seq`.
  IpcEventSlot* ipc = nullptr;
};

bool IsLiveEvent(Event* e);
void RegisterEvent(Event* e);
void UnregisterEvent(Event* e);
// Marks the event reached (runs on the stream worker).
// `at_ns`: when the device reached the record (on the stream's timeline).
void EventReached(Event* e, uint64_t gen, uint64_t at_ns);
// The generation of a new record (caller holds e->mu): a ticket of the shared
// slot for an interprocess event, so that records of every process are ordered.
uint64_t NextRecordGen(Event* e);

// Interprocess events, in any process that has one.
bool IpcEventDone(const Event* e);
void IpcEventWaitHost(const Event* e);

}  // namespace vgpu::sim
