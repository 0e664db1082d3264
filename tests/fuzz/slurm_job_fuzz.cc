// Fuzz target for what the Slurm plugin (cluster/slurm/job_limits.h) reads:
// its plugstack.conf arguments, a job's --vgpu-* options (the job's author
// writes them) and the step's environment. An input is lines:
//   arg KEY=VALUE        a plugstack.conf argument
//   opt NAME=VALUE       a job option (vgpu-mem, vgpu-compute, vgpu-priority)
//   env NAME=VALUE       SLURM_SHARDS_ON_NODE, SLURM_JOB_GPUS, SLURM_STEP_GPUS,
//                        SLURM_JOB_PARTITION, SLURM_JOB_QOS
//   step N               the step id (default: the batch script)
// Self-contradictions fail: a job's memory above shards x shard_mem, a share
// above 100% or above shards x shard_compute, a priority above the admin's
// maps, a group other than slurm-<jobid>, a value that is not a string.
//
// Built without libFuzzer it is a regression runner over slurm_corpus/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/slurm/job_limits.h"
#include "common/byte_size.h"
#include "common/parse.h"
#include "tests/fuzz/fuzz_regression.h"

namespace vs = vgpu::slurm;

namespace {

std::string Check(const std::string& text) {
  std::vector<std::string> args;
  vs::JobOptions opts;
  vs::JobInfo job;
  job.job_id = 77;
  job.step_id = vs::kBatchStep;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string kind = line.substr(0, sp), rest = line.substr(sp + 1);
    const size_t eq = rest.find('=');
    const std::string name = rest.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : rest.substr(eq + 1);
    if (kind == "arg") {
      args.push_back(rest);
    } else if (kind == "opt") {
      if (!vs::ParseJobOption(name, value, &opts).ok()) return "";
    } else if (kind == "step") {
      int64_t n = 0;
      if (vgpu::ParseInteger(rest, 0, UINT32_MAX, &n)) job.step_id = static_cast<uint32_t>(n);
    } else if (kind == "env") {
      if (name == "SLURM_SHARDS_ON_NODE") job.shards_on_node = value;
      if (name == "SLURM_JOB_GPUS") job.job_gpus = value;
      if (name == "SLURM_STEP_GPUS") job.step_gpus = value;
      if (name == "SLURM_JOB_PARTITION") job.partition = value;
      if (name == "SLURM_JOB_QOS") job.qos = value;
    }
  }
  vs::PluginArgs a;
  if (!vs::ParsePluginArgs(args, &a).ok()) return "";
  vs::JobLimits l;
  if (!vs::ComputeJobLimits(a, opts, job, &l).ok()) return "";
  if (!l.applies) return l.admin.is_null() ? "" : "an admin file for a step left alone";
  for (const auto& [key, v] : l.admin.items()) {
    if (!v.is_string()) return "key " + key + " is not a string";
  }
  if (l.admin.value("group", "") != "slurm-77") return "group " + l.admin.value("group", "");
  int64_t shards = 0;
  vgpu::ParseInteger(job.shards_on_node.value_or("0"), 0, UINT32_MAX, &shards);
  if (l.admin.contains("device_memory_limit") && shards > 0) {
    uint64_t mem = 0;
    if (!vgpu::ParseByteSize(l.admin["device_memory_limit"].get<std::string>(), &mem) || mem == 0 ||
        mem > static_cast<uint64_t>(shards) * a.shard_mem) {
      return "memory above the shards': " + l.admin["device_memory_limit"].get<std::string>();
    }
  }
  if (l.admin.contains("compute_share")) {
    uint32_t permille = 0;
    if (!vgpu::ParseSharePermille(l.admin["compute_share"].get<std::string>(), &permille)) {
      return "share unreadable: " + l.admin["compute_share"].get<std::string>();
    }
    if (shards > 0 && a.shard_compute_permille > 0 &&
        permille > static_cast<uint64_t>(shards) * a.shard_compute_permille) {
      return "share above the shards'";
    }
  }
  vs::Priority ceiling = vs::Priority::kNormal, got{};
  for (const auto& [n, p] : a.priority_partition) {
    if (job.partition && n == *job.partition) ceiling = p;
  }
  for (const auto& [n, p] : a.priority_qos) {
    if (job.qos && n == *job.qos) ceiling = p;
  }
  if (!vs::ParsePriorityWord(l.admin.value("priority", ""), &got) || got > ceiling) {
    return "priority above the admin's: " + l.admin.value("priority", "");
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const std::string v = Check(std::string(reinterpret_cast<const char*>(data), size));
      !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER
int main(int argc, char** argv) {
  return vgpu::fuzz::RunRegression(argc, argv,
                                   [](const std::string&, const std::vector<uint8_t>& in) {
                                     return Check(std::string(in.begin(), in.end()));
                                   });
}
#endif
