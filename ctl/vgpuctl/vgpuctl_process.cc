#include "ctl/vgpuctl/vgpuctl_process.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/byte_size.h"
#include "common/counters.h"
#include "common/process_info.h"
#include "ctl/control/client.h"
#include "ctl/control/run_dir.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "ctl/vgpuctl/vgpuctl_daemon.h"

namespace vgpu::ctl::cli {
namespace {

using nlohmann::json;

constexpr int kQueryTimeoutMs = 5000;  // info, ps (per agent: 3 s)
constexpr int kPsTimeoutMs = 3000;
constexpr int kOperationTimeoutMs = 120000;  // silence tolerated during long operations

}  // namespace

namespace {

ClientOptions ClientOpts(const CommonOptions& o, int default_timeout_ms) {
  return {o.run_dir, o.timeout_ms.value_or(default_timeout_ms)};
}

// Sends one request; on any failure reports it and returns false with the
// exit code in *exit_code.
bool Send(pid_t pid, const std::string& cmd, json args, const CommonOptions& o, int timeout_ms,
          const std::string& verb, Response* response, int* exit_code) {
  Request req;
  req.id = 1;
  req.cmd = cmd;
  req.args = std::move(args);
  ProgressDisplay display(verb + " " + std::to_string(pid), !o.quiet);
  Status st = Call(
      pid, req, [&](const Progress& p) { display.Update(p); }, response, ClientOpts(o, timeout_ms));
  display.Finish();
  if (!st.ok()) {
    *exit_code = ReportFailure(o, pid, st, /*from_agent=*/false);
    return false;
  }
  if (!response->ok) {
    *exit_code = ReportFailure(o, pid, Status::Error(response->code, response->error), true);
    return false;
  }
  return true;
}

void PrintJson(pid_t pid, const json& result) {
  std::fputs(DumpLine({{"pid", pid}, {"ok", true}, {"result", result}}).c_str(), stdout);
}

std::string Quota(const DeviceInfo& d) {
  return d.quota && *d.quota != 0 ? FormatByteSize(*d.quota) : "unlimited";
}

std::string Or(const std::string& s, const char* fallback) { return s.empty() ? fallback : s; }

// Which label columns the table has: CLAIM and POD only when some process
// has one of those, SLURM only when some process runs in a Slurm job; a table
// without them is as it was before the labels existed.
struct Labels {
  bool k8s = false;
  bool slurm = false;
  void Note(const InfoResult& r) {
    k8s = k8s || !r.claim.empty() || !r.pod.empty();
    slurm = slurm || !r.slurm_job.empty();
  }
};

// The last columns: the container, then the label columns.
std::string LastColumns(const std::string& container, const std::string& claim,
                        const std::string& pod, const std::string& slurm_job, Labels labels) {
  std::string out = container;
  if (labels.k8s) out = PadRight(out, 12) + " " + PadRight(claim, 30) + " " + pod;
  if (labels.slurm) out = PadRight(out, labels.k8s ? 74 : 12) + " " + slurm_job;
  return out;
}

void PrintPsHeader(Labels labels) {
  std::printf("%-8s %-16s %-10s %-14s %-4s %-12s %-12s %s\n", "PID", "COMMAND", "STATE", "GROUP",
              "DEV", "USED", "QUOTA",
              LastColumns("CONTAINER", "CLAIM", "POD", "SLURM", labels).c_str());
}

// `container`: the container id of a container's agent ("" on the host),
// shown in its short form, as container runtimes do.
void PrintPsRows(const InfoResult& r, const std::string& container, Labels labels) {
  const std::string command = Or(r.command, "-");
  const std::string last =
      LastColumns(container.empty() ? "-" : container.substr(0, 12), Or(r.claim, "-"),
                  Or(r.pod, "-"), Or(r.slurm_job, "-"), labels);
  if (r.devices.empty()) {
    std::printf("%-8lld %-16s %-10s %-14s %-4s %-12s %-12s %s\n", static_cast<long long>(r.pid),
                command.c_str(), r.state.c_str(), Or(r.group, "-").c_str(), "-", "-", "-",
                last.c_str());
  }
  for (const DeviceInfo& d : r.devices) {
    std::printf("%-8lld %-16s %-10s %-14s %-4d %-12s %-12s %s\n", static_cast<long long>(r.pid),
                command.c_str(), r.state.c_str(), Or(r.group, "-").c_str(), d.index,
                FormatByteSize(d.used).c_str(), Quota(d).c_str(), last.c_str());
  }
}

// One "name  value unit" line per counter, in the table's order (common/counters.h);
// names this vgpuctl does not know (a newer agent) follow, without a unit.
void PrintCounters(const std::vector<std::pair<std::string, uint64_t>>& got) {
  if (got.empty()) return;  // an agent older than the counters
  std::printf("counters\n");
  std::vector<bool> shown(got.size(), false);
  auto print = [&](const char* name, const char* unit) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (shown[i] || got[i].first != name) continue;
      shown[i] = true;
      std::printf("  %-22s %llu%s%s\n", name, static_cast<unsigned long long>(got[i].second),
                  unit[0] != '\0' ? " " : "", unit);
    }
  };
  for (const counters::Info& c : counters::kInfo) print(c.name, c.unit);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!shown[i]) print(got[i].first.c_str(), "");
  }
}

// Bytes moved and time taken, when the agent reported them.
std::string Transfer(const json& result) {
  CheckpointResult r;
  if (!ParseCheckpointResult(result, &r).ok() || r.bytes == 0) return "";
  std::string s = " (" + FormatByteSize(r.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf, " in %.2f s", r.seconds);
  s += buf;
  if (r.seconds > 0) {
    s += ", " + FormatByteSize(static_cast<uint64_t>(r.bytes / r.seconds)) + "/s";
  }
  return s + ")";
}

// The call sites holding device memory (VGPU_TRACE_ALLOCATIONS), largest first.
void PrintAllocations(const json& result) {
  if (!result.contains("allocations") || !result["allocations"].is_array()) {
    std::printf("allocations: not traced (start the process with VGPU_TRACE_ALLOCATIONS=on)\n");
    return;
  }
  std::printf("allocations (live bytes, live count, total count, call site):\n");
  try {
    for (const json& a : result["allocations"]) {
      if (!a.is_object() || !a.value("where", json()).is_string()) continue;
      std::printf("  %10s %6llu %8llu  %s\n",
                  FormatByteSize(a.value("live_bytes", uint64_t{0})).c_str(),
                  static_cast<unsigned long long>(a.value("live_count", uint64_t{0})),
                  static_cast<unsigned long long>(a.value("total_count", uint64_t{0})),
                  a.value("where", std::string("?")).c_str());
    }
  } catch (const json::exception&) {
    std::printf("  (malformed allocation list from the agent)\n");
  }
}

std::string StateOf(const json& result, const char* fallback) {
  return result.is_object() && result.contains("state") && result["state"].is_string()
             ? result["state"].get<std::string>()
             : fallback;
}

// suspend / resume: no arguments, a state change.
int StateChange(const PidCommand& o, const char* cmd, const char* done) {
  const pid_t pid = o.pid;
  int rc = kExitOk;
  Response r;
  if (!Send(pid, cmd, json::object(), o, kOperationTimeoutMs, cmd, &r, &rc)) return rc;
  if (o.json) {
    PrintJson(pid, r.result);
  } else {
    std::printf("%s %d%s\n", done, pid, Transfer(r.result).c_str());
  }
  return kExitOk;
}

// The pids of the agents in the run directory whose process is in quota
// group `group` (their info says so); unreachable agents are skipped.
std::vector<pid_t> GroupMembers(const CommonOptions& o, const std::string& group) {
  std::vector<pid_t> pids;
  for (const AgentEntry& a : ListAgents(o.run_dir)) {
    Request req;
    req.cmd = "info";
    Response r;
    InfoResult info;
    if (Call(a.pid, req, nullptr, &r, ClientOpts(o, kPsTimeoutMs)).ok() && r.ok &&
        ParseInfoResult(r.result, &info).ok() && info.group == group) {
      pids.push_back(a.pid);
    }
  }
  return pids;
}

// set --group G: the same change in every member, in pid order, stopping at
// the first refusal. The quota ledger and the scheduler's group slots are
// the group's (the first member changes them for all; the others' requests
// find them changed), and each member also keeps the compute settings for the
// devices it joins later, which is why every member is told.
int SetGroup(const SetCommand& o, const SetArgs& a) {
  if (Status st = CheckAgentDir(o.run_dir.empty() ? RunDir() : o.run_dir);
      st.code == ErrorCode::kUntrusted) {
    return ReportFailure(o, 0, st, /*from_agent=*/false);
  }
  std::vector<pid_t> pids = GroupMembers(o, o.group);
  if (pids.empty()) {
    return ReportFailure(o, 0,
                         Status::Error(ErrorCode::kNoEnt, "no process of quota group '" + o.group +
                                                              "' in the run directory"),
                         /*from_agent=*/false);
  }
  for (pid_t pid : pids) {
    Response r;
    int rc = kExitOk;
    if (!Send(pid, "set", ToJson(a), o, kQueryTimeoutMs, "set", &r, &rc)) return rc;
    if (o.json) {
      PrintJson(pid, r.result);
    } else {
      std::printf("set %d (group %s): %s", pid, o.group.c_str(), DumpLine(r.result).c_str());
    }
  }
  return kExitOk;
}

}  // namespace

int Ps(const CommonOptions& o) {
  int rc = kExitOk;
  if (DaemonPs(o, &rc)) return rc;
  json all = json::array();
  if (Status st = CheckAgentDir(o.run_dir.empty() ? RunDir() : o.run_dir);
      st.code == ErrorCode::kUntrusted) {
    return ReportFailure(o, 0, st, /*from_agent=*/false);
  }
  // Every agent is asked first: whether the table has label columns depends
  // on all of them.
  struct Row {
    pid_t pid;
    Status error;
    InfoResult info;
    std::string container;
  };
  std::vector<Row> rows;
  Labels labels;
  for (const AgentEntry& a : ListAgents(o.run_dir)) {
    if (ProcessStopped(a.pid)) {  // its agent would not answer: not asked
      const Status st = Status::Error(ErrorCode::kBusy, "stopped (SIGSTOP): not asked");
      all.push_back({{"pid", a.pid}, {"state", "stopped"}, {"stopped", true}});
      rows.push_back({a.pid, st, {}, {}});
      continue;
    }
    Request req;
    req.cmd = "info";
    Response r;
    Status st = Call(a.pid, req, nullptr, &r, ClientOpts(o, kPsTimeoutMs));
    if (st.ok() && !r.ok) st = Status::Error(r.code, r.error);
    InfoResult info;
    if (st.ok()) st = ParseInfoResult(r.result, &info);
    if (!st.ok()) {
      // Listed anyway: a busy or foreign agent is still a process to know about.
      all.push_back({{"pid", a.pid}, {"error", st.message}, {"code", ErrorCodeName(st.code)}});
      rows.push_back({a.pid, st, {}, {}});
      continue;
    }
    if (!a.container.empty()) {
      // The agent knows its pid in the container; we address it by ours.
      r.result["container"] = a.container;
      r.result["container_pid"] = info.pid;
      r.result["pid"] = info.pid = a.pid;
    }
    all.push_back(r.result);
    labels.Note(info);
    rows.push_back({a.pid, Status::Ok(), std::move(info), a.container});
  }
  if (o.json) {
    std::fputs(DumpLine({{"processes", all}}).c_str(), stdout);
    return kExitOk;
  }
  PrintPsHeader(labels);
  for (const Row& row : rows) {
    if (!row.error.ok()) {
      const bool stopped = row.error.message.rfind("stopped", 0) == 0;
      std::printf("%-8d %-16s %-10s %s\n", row.pid, "?", stopped ? "stopped" : "?",
                  row.error.message.c_str());
    } else {
      PrintPsRows(row.info, row.container, labels);
    }
  }
  return kExitOk;
}

int Info(const InfoCommand& o) {
  const pid_t pid = o.pid;
  int rc = kExitOk;
  Response r;
  if (!Send(pid, "info", json::object(), o, kQueryTimeoutMs, "info", &r, &rc)) return rc;
  InfoResult info;
  if (Status st = ParseInfoResult(r.result, &info); !st.ok()) {
    return ReportFailure(o, pid, Status::Error(ErrorCode::kProto, st.message), false);
  }
  if (o.json) {
    PrintJson(pid, r.result);
    return kExitOk;
  }
  std::printf(
      "pid       %lld\ncommand   %s\nuid       %lld\nstate     %s\ngroup     %s\n"
      "version   %s\n",
      static_cast<long long>(info.pid), Or(info.command, "-").c_str(),
      static_cast<long long>(info.uid), info.state.c_str(), Or(info.group, "-").c_str(),
      Or(info.version, "-").c_str());
  std::printf("priority  %s\nweight    %lld\ncompute   %s\n", info.priority.c_str(),
              static_cast<long long>(info.weight), info.compute_policy.c_str());
  // Only where set: a job outside Kubernetes, the default, shows as before.
  if (!info.claim.empty()) std::printf("claim     %s\n", info.claim.c_str());
  if (!info.pod.empty()) std::printf("pod       %s\n", info.pod.c_str());
  if (!info.slurm_job.empty()) std::printf("slurm job %s\n", info.slurm_job.c_str());
  if (!info.preemptible) std::printf("preemptible no\n");
  for (const DeviceInfo& d : info.devices) {
    std::string share;
    if (d.compute_share) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "  compute share %g%%", *d.compute_share);
      share = buf;
    }
    std::printf("device %d  %s  used %s of %s%s\n", d.index, Or(d.uuid, "-").c_str(),
                FormatByteSize(d.used).c_str(), Quota(d).c_str(), share.c_str());
  }
  PrintCounters(info.counters);
  if (o.allocations) PrintAllocations(r.result);
  return kExitOk;
}

int Suspend(const PidCommand& o) { return StateChange(o, "suspend", "suspended"); }

int Resume(const PidCommand& o) { return StateChange(o, "resume", "resumed"); }

int Checkpoint(const CheckpointCommand& o) {
  const pid_t pid = o.pid;
  int rc = kExitOk;
  CheckpointArgs a{o.dir, o.leave_running};
  Response r;
  if (!Send(pid, "checkpoint", ToJson(a), o, kOperationTimeoutMs, "checkpoint", &r, &rc)) {
    return rc;
  }
  if (o.json) {
    PrintJson(pid, r.result);
    return kExitOk;
  }
  CheckpointResult c;
  ParseCheckpointResult(r.result, &c);
  std::printf("checkpointed %d to %s%s; the process is %s\n", pid, Or(c.path, "?").c_str(),
              Transfer(r.result).c_str(),
              StateOf(r.result, o.leave_running ? "running" : "suspended").c_str());
  return kExitOk;
}

int Restore(const RestoreCommand& o) {
  const pid_t pid = o.pid;
  int rc = kExitOk;
  // Onto another GPU: the checkpointed job's contexts move there first (its
  // memory is not on any device), then the image comes back on the target.
  if (o.device && (rc = MoveBeforeRestore(pid, *o.device, o)) != kExitOk) return rc;
  RestoreArgs a{o.from};
  Response r;
  if (!Send(pid, "restore", ToJson(a), o, kOperationTimeoutMs, "restore", &r, &rc)) return rc;
  if (o.json) {
    PrintJson(pid, r.result);
    return kExitOk;
  }
  CheckpointResult c;
  ParseCheckpointResult(r.result, &c);
  std::printf("restored %d from %s%s\n", pid, Or(c.path, "?").c_str(), Transfer(r.result).c_str());
  return kExitOk;
}

int Set(const SetCommand& o) {
  const SetArgs& a = o.args;
  // Checked by vgpuctl.cc's parser; kept here as the function's contract.
  if (o.pid.has_value() == !o.group.empty() ||
      (!a.memory_limit && !a.share_permille && !a.weight && !a.priority)) {
    return kExitUsage;
  }
  if (!o.group.empty()) return SetGroup(o, a);
  const pid_t pid = *o.pid;
  int rc = kExitOk;
  Response r;
  if (!Send(pid, "set", ToJson(a), o, kQueryTimeoutMs, "set", &r, &rc)) return rc;
  if (o.json) {
    PrintJson(pid, r.result);
  } else {
    std::printf("set %d: %s", pid, DumpLine(r.result).c_str());
  }
  return kExitOk;
}

}  // namespace vgpu::ctl::cli
