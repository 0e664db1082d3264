#include "sim/engine/event.h"

#include <time.h>

#include <algorithm>

#include "sim/engine/handle_registry.h"
#include "sim/engine/ipc.h"
#include "sim/node/node_region.h"

namespace vgpu::sim {
namespace {
auto* g_events = new HandleRegistry<Event>();  // never destroyed: workers may outlive exit
}  // namespace

void RegisterEvent(Event* e) { g_events->Add(e); }
void UnregisterEvent(Event* e) { g_events->Remove(e); }
bool IsLiveEvent(Event* e) { return g_events->Contains(e); }

void EventReached(Event* e, uint64_t gen, uint64_t at_ns) {
  if (e->ipc != nullptr) IpcEventReached(e->ipc, gen);
  // Only the newest record stamps the time; an older pending record that a
  // re-record superseded must not overwrite it.
  if (e->time_gen.load(std::memory_order_relaxed) < gen) {
    e->time_ns.store(at_ns, std::memory_order_relaxed);
    e->time_gen.store(gen, std::memory_order_release);
  }
}

uint64_t NextRecordGen(Event* e) {
  e->gen = e->ipc != nullptr ? e->ipc->recorded.fetch_add(1) + 1 : e->gen + 1;
  return e->gen;
}

bool IpcEventDone(const Event* e) {
  return e->ipc->reached.load(std::memory_order_acquire) >=
         e->ipc->recorded.load(std::memory_order_acquire);
}

void IpcEventWaitHost(const Event* e) {
  const uint64_t target = e->ipc->recorded.load(std::memory_order_acquire);
  long sleep_ns = 1000;
  while (e->ipc->reached.load(std::memory_order_acquire) < target) {
    timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 50'000L);
  }
}

}  // namespace vgpu::sim
