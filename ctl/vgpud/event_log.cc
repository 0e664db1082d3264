#include "ctl/vgpud/event_log.h"

#include <chrono>

#include "common/log.h"

namespace vgpu::vgpud {

nlohmann::json ToJson(const Event& e) {
  nlohmann::json j = {{"time_ms", e.unix_ms}, {"kind", e.kind}, {"pid", e.pid}};
  if (e.for_pid != 0) j["for_pid"] = e.for_pid;
  if (!e.device.empty()) j["device"] = e.device;
  if (e.bytes != 0) j["bytes"] = e.bytes;
  if (e.seconds != 0) j["seconds"] = e.seconds;
  if (!e.message.empty()) j["message"] = e.message;
  return j;
}

bool FromJson(const nlohmann::json& j, Event* out) {
  if (!j.is_object()) return false;
  out->unix_ms = j.value("time_ms", int64_t{0});
  out->kind = j.value("kind", std::string());
  out->pid = j.value("pid", 0);
  out->for_pid = j.value("for_pid", 0);
  out->device = j.value("device", std::string());
  out->bytes = j.value("bytes", uint64_t{0});
  out->seconds = j.value("seconds", 0.0);
  out->message = j.value("message", std::string());
  return !out->kind.empty();
}

void EventLog::Add(Event e) {
  e.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  VGPU_LOG(kInfo, "{} pid {}{}{}{}: {}", e.kind, e.pid,
           e.for_pid != 0 ? " for pid " + std::to_string(e.for_pid) : std::string(),
           e.bytes != 0 ? ", " + std::to_string(e.bytes) + " bytes" : std::string(),
           e.seconds != 0 ? ", " + std::to_string(e.seconds) + " s" : std::string(), e.message);
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
  while (events_.size() > kCapacity) events_.pop_front();
}

std::vector<Event> EventLog::Recent(size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t first = events_.size() > n ? events_.size() - n : 0;
  return {events_.begin() + static_cast<std::ptrdiff_t>(first), events_.end()};
}

void EventLog::Restore(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) events_.push_back(e);
  while (events_.size() > kCapacity) events_.pop_front();
}

}  // namespace vgpu::vgpud
