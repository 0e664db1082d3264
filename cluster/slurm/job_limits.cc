#include "cluster/slurm/job_limits.h"

#include <algorithm>
#include <limits>

#include "common/byte_size.h"
#include "common/parse.h"

namespace vgpu::slurm {
namespace {

constexpr const char* kWords[] = {"low", "normal", "high"};

Status Invalid(const std::string& message) {
  return Status::Error(ErrorCode::kInval, "vgpu: " + message);
}

// A value fit for a one-line message: control characters escaped, truncated.
std::string Shown(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 120)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[(c >> 4) & 0xf];
      out += hex[c & 0xf];
    } else {
      out += c;
    }
  }
  return s.size() > 120 ? out + "..." : out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// "NAME:PRIO,NAME:PRIO"; every name once.
bool ParsePriorityMap(const std::string& value, std::vector<std::pair<std::string, Priority>>* out,
                      std::string* why) {
  out->clear();
  for (const std::string& item : Split(value, ',')) {
    const size_t colon = item.rfind(':');
    Priority p{};
    if (colon == std::string::npos || colon == 0) {
      *why = "item '" + Shown(item) + "' is not NAME:PRIO";
      return false;
    }
    const std::string name = item.substr(0, colon);
    if (!ParsePriorityWord(item.substr(colon + 1), &p)) {
      *why = "item '" + Shown(item) + "': the priority must be low, normal or high";
      return false;
    }
    for (const auto& [n, _] : *out) {
      if (n == name) {
        *why = "'" + Shown(name) + "' is listed twice";
        return false;
      }
    }
    out->emplace_back(name, p);
  }
  return true;
}

std::optional<Priority> Lookup(const std::vector<std::pair<std::string, Priority>>& map,
                               const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  for (const auto& [n, p] : map) {
    if (n == *name) return p;
  }
  return std::nullopt;
}

// The step's GRES gpu indices, from the variable slurmstepd sets for it:
// SLURM_JOB_GPUS for the batch script and the interactive step (gres_g_job_set_env),
// SLURM_STEP_GPUS for every other step (gres_g_step_set_env). Not
// CUDA_VISIBLE_DEVICES: it holds local indices under ConstrainDevices, or
// unique ids, and a tenant sets it freely.
Status StepGpus(const JobInfo& job, std::vector<int>* out) {
  const bool job_level = job.step_id == kBatchStep || job.step_id == kInteractiveStep;
  const char* name = job_level ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  const std::optional<std::string>& v = job_level ? job.job_gpus : job.step_gpus;
  out->clear();
  if (!v || v->empty()) return Status::Ok();
  for (const std::string& item : Split(*v, ',')) {
    int index = 0;
    if (!ParseDeviceIndex(item, 1023, &index)) {
      return Invalid(std::string(name) + "='" + Shown(*v) + "': '" + Shown(item) +
                     "' is not a GPU index");
    }
    if (std::find(out->begin(), out->end(), index) != out->end()) continue;
    out->push_back(index);
  }
  return Status::Ok();
}

std::string SizeText(uint64_t bytes) { return FormatByteSize(bytes); }

}  // namespace

const char* PriorityWord(Priority p) { return kWords[static_cast<int>(p)]; }

bool ParsePriorityWord(const std::string& text, Priority* out) {
  for (int i = 0; i < 3; ++i) {
    if (text == kWords[i]) {
      *out = static_cast<Priority>(i);
      return true;
    }
  }
  return false;
}

std::string JobGroup(uint32_t job_id) { return "slurm-" + std::to_string(job_id); }

Status ParsePluginArgs(const std::vector<std::string>& args, PluginArgs* out) {
  *out = PluginArgs{};
  std::vector<std::string> seen;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string key = eq == std::string::npos ? arg : arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto bad = [&arg](const std::string& why) {
      return Invalid("plugstack argument '" + Shown(arg) + "': " + why);
    };
    if (eq == std::string::npos) return bad("expected key=value");
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return bad("given twice");
    seen.push_back(key);
    if (value.empty()) return bad("wants a value");
    if (key == "lib") {
      if (value[0] != '/') return bad("wants an absolute path");
      out->lib = value;
    } else if (key == "shard_mem") {
      if (!ParseByteSize(value, &out->shard_mem) || out->shard_mem == 0) {
        return bad("expected a size above 0, e.g. 8GiB, 512MiB, 1g or a byte count");
      }
    } else if (key == "shard_compute") {
      if (!ParseSharePermille(value, &out->shard_compute_permille)) {
        return bad("expected a percentage above 0 and at most 100 (30, 12.5, 30%)");
      }
    } else if (key == "devices") {
      for (const std::string& item : Split(value, ',')) {
        std::string uuid;
        if (!ParseGpuUuid(item, &uuid)) {
          return bad("'" + Shown(item) + "' is not a GPU UUID (GPU-xxxxxxxx-xxxx-...)");
        }
        if (std::find(out->devices.begin(), out->devices.end(), uuid) != out->devices.end()) {
          return bad("'" + Shown(item) + "' is listed twice");
        }
        out->devices.push_back(uuid);
      }
    } else if (key == "priority_partition" || key == "priority_qos") {
      std::string why;
      auto* map = key == "priority_qos" ? &out->priority_qos : &out->priority_partition;
      if (!ParsePriorityMap(value, map, &why)) return bad(why);
    } else if (key == "suspend" || key == "weight_per_shard") {
      if (!ParseSwitch(value, key == "suspend" ? &out->suspend : &out->weight_per_shard)) {
        return bad("expected on or off");
      }
    } else {
      return bad(
          "unknown key: expected lib, shard_mem, shard_compute, devices, priority_partition, "
          "priority_qos, suspend or weight_per_shard");
    }
  }
  return Status::Ok();
}

Status ParseJobOption(const std::string& name, const std::string& value, JobOptions* out) {
  auto bad = [&](const std::string& why) {
    return Invalid("--" + name + "='" + Shown(value) + "': " + why);
  };
  if (name == kOptMem) {
    uint64_t bytes = 0;
    if (!ParseByteSize(value, &bytes) || bytes == 0) {
      return bad("expected a size above 0, e.g. 8GiB, 512MiB, 1g or a byte count");
    }
    out->mem = bytes;
  } else if (name == kOptCompute) {
    uint32_t permille = 0;
    if (!ParseSharePermille(value, &permille)) {
      return bad("expected a percentage above 0 and at most 100 (30, 12.5, 30%)");
    }
    out->compute_permille = permille;
  } else if (name == kOptPriority) {
    Priority p{};
    if (!ParsePriorityWord(value, &p)) return bad("expected low, normal or high");
    out->priority = p;
  } else {
    return Invalid("unknown option --" + Shown(name));
  }
  return Status::Ok();
}

Status ComputeJobLimits(const PluginArgs& args, const JobOptions& opts, const JobInfo& job,
                        JobLimits* out) {
  *out = JobLimits{};
  uint64_t shards = 0;
  if (job.shards_on_node && !job.shards_on_node->empty()) {
    int64_t n = 0;
    if (!ParseInteger(*job.shards_on_node, 0, std::numeric_limits<uint32_t>::max(), &n)) {
      return Invalid("SLURM_SHARDS_ON_NODE='" + Shown(*job.shards_on_node) +
                     "' is not a shard count");
    }
    shards = static_cast<uint64_t>(n);
  }
  std::vector<int> gpus;
  if (Status st = StepGpus(job, &gpus); !st.ok()) return st;
  if (shards == 0 && gpus.empty()) return Status::Ok();  // no GPU: not ours
  if (gpus.empty()) {
    return Invalid("the step has " + std::to_string(shards) +
                   " shards but slurmstepd names no GPU for them (SLURM_JOB_GPUS/SLURM_STEP_GPUS)");
  }
  std::string visible;
  for (int i : gpus) {
    std::string id = std::to_string(i);
    if (!args.devices.empty()) {
      if (static_cast<size_t>(i) >= args.devices.size()) {
        return Invalid("GRES gpu index " + id + " has no UUID in the plugin's devices= (" +
                       std::to_string(args.devices.size()) + " listed)");
      }
      id = args.devices[i];
    }
    visible += (visible.empty() ? "" : ",") + id;
  }
  nlohmann::json& a = out->admin;
  a["group"] = JobGroup(job.job_id);
  a["visible_devices"] = visible;
  a["slurm_job"] = std::to_string(job.job_id);
  a["suspend_on_sigtstp"] = args.suspend ? "true" : "false";

  // Memory: the shards' (a whole-GPU job has no ceiling); the job's option lowers it.
  std::optional<uint64_t> mem;
  if (shards > 0) {
    if (args.shard_mem == 0) {
      return Invalid("the step has shards but the plugin has no shard_mem= argument");
    }
    if (shards > std::numeric_limits<uint64_t>::max() / args.shard_mem) {
      return Invalid("SLURM_SHARDS_ON_NODE=" + std::to_string(shards) + " x shard_mem overflows");
    }
    mem = shards * args.shard_mem;
  }
  if (opts.mem) {
    if (mem && *opts.mem > *mem) {
      out->messages.push_back("vgpu: --vgpu-mem=" + SizeText(*opts.mem) + " is above the job's " +
                              SizeText(*mem) + " (" + std::to_string(shards) + " shards of " +
                              SizeText(args.shard_mem) + "): the job gets " + SizeText(*mem));
    } else {
      mem = opts.mem;
    }
  }
  if (mem) a["device_memory_limit"] = std::to_string(*mem);

  // Compute: the shards' when shard_compute= is given; the job's option lowers it.
  std::optional<uint32_t> share;
  if (shards > 0 && args.shard_compute_permille > 0) {
    share = static_cast<uint32_t>(std::min<uint64_t>(1000, shards * args.shard_compute_permille));
  }
  if (opts.compute_permille) {
    if (share && *opts.compute_permille > *share) {
      out->messages.push_back("vgpu: --vgpu-compute=" + FormatPercent(*opts.compute_permille) +
                              " is above the job's " + FormatPercent(*share) + ": the job gets " +
                              FormatPercent(*share));
    } else {
      share = opts.compute_permille;
    }
  }
  if (share) a["compute_share"] = FormatPercent(*share);
  if (args.weight_per_shard && shards > 0) {
    a["compute_weight"] = std::to_string(std::min<uint64_t>(kMaxComputeWeight, shards));
    out->env_defaults.emplace_back("VGPU_COMPUTE_WEIGHT", a["compute_weight"]);
  }

  // Priority: the QOS's entry, else the partition's, else normal.
  Priority prio = Priority::kNormal;
  if (auto p = Lookup(args.priority_qos, job.qos)) {
    prio = *p;
  } else if (auto q = Lookup(args.priority_partition, job.partition)) {
    prio = *q;
  }
  if (opts.priority) {
    if (*opts.priority > prio) {
      out->messages.push_back(std::string("vgpu: --vgpu-priority=") + PriorityWord(*opts.priority) +
                              " is above the job's " + PriorityWord(prio) + ": the job gets " +
                              PriorityWord(prio));
    } else {
      prio = *opts.priority;
    }
  }
  a["priority"] = PriorityWord(prio);
  out->env_defaults.emplace_back("VGPU_PRIORITY", PriorityWord(prio));
  out->applies = true;
  return Status::Ok();
}

}  // namespace vgpu::slurm
