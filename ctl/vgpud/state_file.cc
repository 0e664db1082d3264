#include "ctl/vgpud/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ctl/control/protocol.h"

namespace vgpu::vgpud {
namespace {

constexpr const char* kMagic = "vgpud-state";
constexpr int kVersion = 1;

Status Errno(const std::string& what) {
  return Status::Error(ErrorCode::kIo, what + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write " + path);
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteState(const std::string& path, const DaemonState& s) {
  nlohmann::json parked = nlohmann::json::array();
  for (const ParkedJob& p : s.parked) {
    parked.push_back({{"pid", p.pid},
                      {"start_time", p.start_time},
                      {"waiting_since_ms", p.waiting_since_unix_ms},
                      {"on_disk", p.on_disk},
                      {"image", p.image_path}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : s.events) events.push_back(ToJson(e));
  const std::string text =
      ctl::DumpLine({{"format", kMagic}, {"version", kVersion}, {"parked", parked},
                     {"events", events}, {"drained", s.drained}}) + "\n";
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Errno("open " + tmp);
  Status st = WriteAll(fd, text, tmp);
  if (st.ok() && fsync(fd) != 0) st = Errno("fsync " + tmp);
  close(fd);
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) st = Errno("rename " + tmp);
  if (!st.ok()) unlink(tmp.c_str());  // a full disk leaves the previous state whole
  return st;
}

Status ReadState(const std::string& path, DaemonState* out) {
  std::ifstream f(path);
  if (!f) return Status::Error(ErrorCode::kNoEnt, "no state file " + path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", std::string()) != kMagic) {
    return Status::Error(ErrorCode::kInval, path + ": not a vgpud state file");
  }
  if (j.value("version", 0) != kVersion) {
    return Status::Error(ErrorCode::kInval, path + ": unsupported state version");
  }
  try {
    for (const auto& p : j.at("parked")) {
      ParkedJob pj;
      pj.pid = p.at("pid").get<pid_t>();
      pj.start_time = p.at("start_time").get<uint64_t>();
      pj.waiting_since_unix_ms = p.value("waiting_since_ms", int64_t{0});
      pj.on_disk = p.value("on_disk", false);
      pj.image_path = p.value("image", std::string());
      out->parked.push_back(pj);
    }
    if (j.contains("drained")) out->drained = j.at("drained").get<std::vector<std::string>>();
    for (const auto& e : j.at("events")) {
      Event ev;
      if (FromJson(e, &ev)) out->events.push_back(ev);
    }
  } catch (const std::exception& e) {
    out->parked.clear();
    out->events.clear();
    return Status::Error(ErrorCode::kInval, path + ": " + e.what());
  }
  return Status::Ok();
}

}  // namespace vgpu::vgpud
