// Fuzz target for the control protocol (ctl/protocol.h): the request lines
// the agent reads from its socket, and the lines vgpuctl reads back from an
// agent (a process that may belong to someone else).
//
// The input is a byte stream framed as the agent frames it (lines split at
// '\n', a trailing '\r' dropped, blank lines skipped, none longer than
// kMaxRequestBytes). Each line goes through what the agent does before it
// calls a handler (ParseRequest, IsKnownCommand, ValidateArgs) and what the
// client does with an answer (ParseServerLine, ParseInfoResult,
// ParseCheckpointResult). Self-contradictions fail: an accepted request that
// does not survive SerializeRequest and ParseRequest unchanged, typed
// arguments that change through ToJson, a response that is not one line of
// JSON.
//
// With libFuzzer (see scripts/fuzz.sh) this is a LLVMFuzzerTestOneInput
// target. Built without it it is a regression runner
// (`ctl_protocol_fuzz_regression PATH...`): in files named valid-* every line
// must be a request the agent accepts, in bad-* every line one it refuses;
// other names only must not crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/control/protocol.h"
#include "tests/fuzz/fuzz_regression.h"

namespace ctl = vgpu::ctl;
using nlohmann::json;

namespace {

std::vector<std::string_view> Lines(std::string_view in) {
  std::vector<std::string_view> out;
  while (!in.empty()) {
    const size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > ctl::kMaxRequestBytes) continue;  // the agent closes the connection
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    out.push_back(line);
  }
  return out;
}

// An error response as the agent would send it: one line of JSON.
std::string CheckResponse(const ctl::Status& s) {
  const std::string line = ctl::SerializeResponse(ctl::Response::Error(s));
  if (line.find('\n') != line.size() - 1) return "response is not one line";
  if (json::parse(line, nullptr, false).is_discarded()) return "response is not JSON";
  return "";
}

template <typename Args, typename ParseFn>
std::string RoundTrip(const json& args, ParseFn parse) {
  Args a, b;
  if (!parse(args, &a).ok()) return "typed arguments refused after ValidateArgs accepted them";
  if (!parse(ctl::ToJson(a), &b).ok() || ctl::ToJson(a) != ctl::ToJson(b))
    return "typed arguments change through ToJson";
  return "";
}

std::string CheckTypedArgs(const ctl::Request& r) {
  if (r.cmd == "checkpoint")
    return RoundTrip<ctl::CheckpointArgs>(r.args, ctl::ParseCheckpointArgs);
  if (r.cmd == "restore") return RoundTrip<ctl::RestoreArgs>(r.args, ctl::ParseRestoreArgs);
  if (r.cmd == "set") return RoundTrip<ctl::SetArgs>(r.args, ctl::ParseSetArgs);
  return "";
}

// The agent's side of one line. *accepted: it would reach a handler.
std::string Request(std::string_view line, bool* accepted) {
  *accepted = false;
  ctl::Request r;
  ctl::Status s = ctl::ParseRequest(line, &r);
  if (s.ok() && !ctl::IsKnownCommand(r.cmd)) s = ctl::Status::Error(ctl::ErrorCode::kNoSys, r.cmd);
  if (s.ok()) s = ctl::ValidateArgs(r.cmd, r.args);
  if (!s.ok()) return CheckResponse(s);
  *accepted = true;
  // Compared as text: a number beyond double's range reads as infinity and
  // is written as null.
  ctl::Request again;
  if (!ctl::ParseRequest(ctl::SerializeRequest(r), &again).ok() || again.cmd != r.cmd ||
      again.id != r.id || ctl::DumpLine(again.args) != ctl::DumpLine(r.args))
    return "request changes through SerializeRequest";
  return CheckTypedArgs(r);
}

// The client's side of one line.
void ServerLine(std::string_view line) {
  ctl::ServerLine l;
  if (!ctl::ParseServerLine(line, &l).ok() || l.is_progress || !l.response.ok) return;
  ctl::InfoResult info;
  ctl::ParseInfoResult(l.response.result, &info);
  ctl::CheckpointResult result;
  ctl::ParseCheckpointResult(l.response.result, &result);
}

// Returns a self-contradiction, or ""; counts accepted and refused requests.
std::string RunLines(const uint8_t* data, size_t size, int* accepted, int* refused) {
  *accepted = *refused = 0;
  for (std::string_view line : Lines({reinterpret_cast<const char*>(data), size})) {
    bool ok = false;
    if (std::string v = Request(line, &ok); !v.empty()) return v;
    ++(ok ? *accepted : *refused);
    ServerLine(line);
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int accepted, refused;
  if (const std::string v = RunLines(data, size, &accepted, &refused); !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

std::string CheckFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  int accepted, refused;
  if (std::string v = RunLines(bytes.data(), bytes.size(), &accepted, &refused); !v.empty())
    return v;
  return vgpu::fuzz::CheckLineCounts(name, accepted, refused);
}

}  // namespace

int main(int argc, char** argv) { return vgpu::fuzz::RunRegression(argc, argv, CheckFile); }

#endif  // VGPU_LIBFUZZER
