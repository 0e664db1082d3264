// Fuzz target for vgpud's request parser and peer policy
// (ctl/vgpud/daemon_server.h, ParseDaemonRequest): the lines any local user
// may write to vgpud.sock. The first byte of the input picks the peer (a job
// asking for itself, a job asking for another pid, root); the rest is framed
// in lines as vgpud frames them. Self-contradictions fail: an accepted
// make_room that targets another process for a non-admin peer, an accepted
// request without its target, an error without a message, a response that is
// not one line of JSON.
//
// Built without libFuzzer it is a regression runner over vgpud_corpus/:
// in valid-* files every line must be accepted for the job peer, in bad-*
// every line refused; other names only must not crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/control/protocol.h"
#include "ctl/vgpud/daemon_server.h"
#include "tests/fuzz/fuzz_regression.h"

namespace vgpud = vgpu::vgpud;

namespace {

constexpr pid_t kJobPid = 4242;

vgpud::Peer PeerOf(uint8_t selector) {
  switch (selector % 3) {
    case 0: return {kJobPid, 1000, 1000, false};
    case 1: return {kJobPid + 1, 1000, 1000, false};
    default: return {1, 0, 0, true};
  }
}

std::string CheckLine(std::string_view line, const vgpud::Peer& peer, bool* accepted) {
  vgpud::DaemonRequest r;
  vgpu::Status s = vgpud::ParseDaemonRequest(line, peer, &r);
  *accepted = s.ok();
  if (!s.ok()) {
    if (s.message.empty()) return "refused without a message";
    const std::string out = vgpu::ctl::SerializeResponse(vgpu::ctl::Response::Error(s));
    if (out.empty() || out.back() != '\n' || out.find('\n') != out.size() - 1) return "response not one line";
    return "";
  }
  if ((r.req.cmd == "make_room" || r.req.cmd == "set") && r.target <= 0) return "accepted without a target";
  if (r.req.cmd == "make_room" && !peer.admin && r.target != peer.pid) return "make_room for another pid accepted";
  return "";
}

std::string RunLines(const uint8_t* data, size_t size, uint8_t selector, int* accepted, int* refused) {
  *accepted = *refused = 0;
  const vgpud::Peer peer = PeerOf(selector);
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (!in.empty()) {
    const size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    bool ok = false;
    if (std::string v = CheckLine(line, peer, &ok); !v.empty()) return v + ": " + std::string(line.substr(0, 200));
    ++(ok ? *accepted : *refused);
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  int accepted, refused;
  if (const std::string v = RunLines(data + 1, size - 1, data[0], &accepted, &refused); !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

std::string CheckFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  int accepted, refused;
  if (std::string v = RunLines(bytes.data(), bytes.size(), 0, &accepted, &refused); !v.empty()) return v;
  return vgpu::fuzz::CheckLineCounts(name, accepted, refused);
}

}  // namespace

int main(int argc, char** argv) { return vgpu::fuzz::RunRegression(argc, argv, CheckFile); }

#endif  // VGPU_LIBFUZZER
