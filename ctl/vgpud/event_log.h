// vgpud's recent decisions (vgpuctl events, the state file): a bounded ring,
// each decision also one log line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vgpu::vgpud {

struct Event {
  int64_t unix_ms = 0;
  std::string kind;  // suspend, resume, checkpoint, restore, exit, set, start, refuse
  pid_t pid = 0;
  pid_t for_pid = 0;  // the job it was done for (0: none)
  std::string device;
  uint64_t bytes = 0;
  double seconds = 0;
  std::string message;
};

nlohmann::json ToJson(const Event& e);
bool FromJson(const nlohmann::json& j, Event* out);

class EventLog {
 public:
  static constexpr size_t kCapacity = 512;
  // Stamps, logs (one line) and keeps the event.
  void Add(Event e);
  std::vector<Event> Recent(size_t n) const;
  void Restore(const std::vector<Event>& events);  // from the state file

 private:
  mutable std::mutex mu_;
  std::deque<Event> events_;
};

}  // namespace vgpu::vgpud
