#include "sim/engine/event.h"

#include "sim/engine/handle_registry.h"
#include "sim/node/node_region.h"

namespace vgpu::sim {
namespace {
auto* g_events = new HandleRegistry<Event>();  // never destroyed: workers may outlive exit
}  // namespace

void RegisterEvent(Event* e) { g_events->Add(e); }
void UnregisterEvent(Event* e) { g_events->Remove(e); }
bool IsLiveEvent(Event* e) { return g_events->Contains(e); }

void EventReached(Event* e, uint64_t gen, uint64_t at_ns) {
  // Only the newest record stamps the time; an older pending record that a
  // re-record superseded must not overwrite it.
  if (e->time_gen.load(std::memory_order_relaxed) < gen) {
    e->time_ns.store(at_ns, std::memory_order_relaxed);
    e->time_gen.store(gen, std::memory_order_release);
  }
}

}  // namespace vgpu::sim
