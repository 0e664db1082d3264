#include "sim/event.h"

#include <shared_mutex>
#include <unordered_set>

#include "sim/node_region.h"

namespace vgpu::sim {
namespace {
std::shared_mutex g_events_mu;
auto* g_events = new std::unordered_set<Event*>();
}  // namespace

void RegisterEvent(Event* e) {
  std::unique_lock lock(g_events_mu);
  g_events->insert(e);
}

void UnregisterEvent(Event* e) {
  std::unique_lock lock(g_events_mu);
  g_events->erase(e);
}

bool IsLiveEvent(Event* e) {
  std::shared_lock lock(g_events_mu);
  return g_events->count(e) != 0;
}

void EventReached(Event* e, uint64_t gen) {
  // Only the newest record stamps the time; an older pending record that a
  // re-record superseded must not overwrite it.
  if (e->time_gen.load(std::memory_order_relaxed) < gen) {
    e->time_ns.store(NowNs(), std::memory_order_relaxed);
    e->time_gen.store(gen, std::memory_order_release);
  }
}

}  // namespace vgpu::sim
