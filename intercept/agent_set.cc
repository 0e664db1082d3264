#include "intercept/agent_set.h"

#include <string>
#include <vector>

#include "common/byte_size.h"
#include "common/log.h"
#include "common/parse.h"
#include "intercept/node_devices.h"
#include "intercept/runtime.h"
#include "quota/quota_ledger.h"
#include "share/compute_share.h"

namespace vgpu {
namespace {

using ctl::ErrorCode;
using ctl::Response;

const char* PolicyName(Config::ComputePolicy p) {
  switch (p) {
    case Config::ComputePolicy::kFixed:
      return "fixed";
    case Config::ComputePolicy::kWeighted:
      return "weighted";
    default:
      return "native";
  }
}

// The compute policy on visible device v as the scheduler applies it: native
// when the process runs without the compute share.
Config::ComputePolicy PolicyOn(int v) {
  if (Runtime::Get().share() == nullptr) return Config::ComputePolicy::kNative;
  return Runtime::Get().config().EffectivePolicyFor(v);
}

// Pushes the settings in force to the scheduler's group slots of `targets`.
void PushToScheduler(const std::vector<int>& targets) {
  ComputeShare* cs = Runtime::Get().share();
  Runtime& rt = Runtime::Get();
  for (int v : targets) {
    Config::ComputePolicy policy = PolicyOn(v);
    if (cs == nullptr || policy == Config::ComputePolicy::kNative) continue;
    cs->UpdateParams(NodeDevice(rt.devices().ToOrdinal(VisibleIndex(v))).value(),
                     rt.settings().ParamsFor(policy, v));
  }
}

// Changes the quota of every target device or of none: devices change in
// order, and a refusal on one (EBUSY: below what the group holds there)
// puts the earlier ones back.
Response SetMemoryLimit(uint64_t requested, const std::vector<int>& targets) {
  Runtime& rt = Runtime::Get();
  DeviceLedger* ledger = rt.ledger();
  const uint64_t bytes = requested == 0 ? kUnlimited : requested;
  std::vector<std::pair<int, uint64_t>> changed;  // physical device, old limit
  for (int v : targets) {
    const int p = rt.devices().ToOrdinal(VisibleIndex(v)).value();
    const uint64_t old = ledger->Limit(p);
    // Freed chunks the VMM keeps for reuse are charged, but not the job's:
    // they go first (never waiting for an allocation or a suspend in flight).
    if (bytes < old) Runtime::Get().vmm().TryTrimCache(p);
    uint64_t used = 0;
    if (!ledger->TrySetLimit(p, bytes, &used)) {
      for (const auto& [d, limit] : changed) ledger->SetLimit(d, limit);
      return Response::Error(
          ErrorCode::kBusy,
          "memory_limit " + FormatByteSize(bytes) + " on device " + std::to_string(v) +
              " is below current usage " + FormatByteSize(used) + " (" + std::to_string(used) +
              " bytes" + (rt.config().group.empty() ? "" : ", group '" + rt.config().group + "'") +
              "); free memory first or choose a larger limit");
    }
    changed.emplace_back(p, old);
  }
  return Response::Ok();
}

Response CheckSupported(const ctl::SetArgs& a, const std::vector<int>& targets) {
  Runtime& rt = Runtime::Get();
  if (a.memory_limit && rt.ledger() == nullptr) {
    return Response::Error(ErrorCode::kNoSys,
                           "memory_limit: this process has no quota ledger (it started without "
                           "VGPU_DEVICE_MEMORY_LIMIT and VGPU_GROUP), so its device memory is not "
                           "counted; start it with either to change its quota at runtime");
  }
  if (a.share_permille) {
    bool any = false;
    for (int v : targets) any = any || PolicyOn(v) != Config::ComputePolicy::kNative;
    if (!any) {
      return Response::Error(ErrorCode::kNoSys,
                             "compute_share: the compute share is off here (compute policy "
                             "native); start the process with VGPU_COMPUTE_SHARE, "
                             "VGPU_COMPUTE_WEIGHT or VGPU_COMPUTE_POLICY to change it at runtime");
    }
  }
  return Response::Ok();
}

// A tenant's own request (not root's) obeys the admin's ceilings: one above
// them is refused whole, naming the ceiling and who sets it.
Response CheckCeilings(const ctl::SetArgs& a, const std::vector<int>& targets) {
  const Config& config = Runtime::Get().config();
  auto refuse = [](const std::string& what, const std::string& cap, const std::string& source) {
    return Response::Error(ErrorCode::kPerm,
                           what + " is above the ceiling " + cap + " that " + source + " sets");
  };
  for (int v : targets) {
    const Config::Ceilings c = config.CeilingsFor(v);
    const uint64_t bytes =
        a.memory_limit && *a.memory_limit == 0 ? kUnlimited : a.memory_limit.value_or(0);
    if (a.memory_limit && c.memory_limit != Config::kNoLimit && bytes > c.memory_limit) {
      // 0 asks for no limit at all: say so rather than "0 B".
      return refuse(*a.memory_limit == 0 ? std::string("memory_limit 0 (unlimited)")
                                         : "memory_limit " + FormatByteSize(*a.memory_limit),
                    FormatByteSize(c.memory_limit), c.memory_source);
    }
    if (a.share_permille && c.share_permille != 0 && *a.share_permille > c.share_permille) {
      return refuse("compute_share " + FormatPercent(*a.share_permille),
                    FormatPercent(c.share_permille), c.share_source);
    }
    if (a.weight && static_cast<uint32_t>(*a.weight) > c.weight) {
      return refuse("weight " + std::to_string(*a.weight), std::to_string(c.weight),
                    c.weight_source);
    }
    Config::Priority p = Config::Priority::kNormal;
    if (a.priority && ParsePriorityName(*a.priority, &p) && p > c.priority) {
      return refuse("priority " + *a.priority, PriorityName(c.priority), c.priority_source);
    }
  }
  return Response::Ok();
}

}  // namespace

Response HandleSet(const ctl::Request& req) {
  ctl::SetArgs a;
  if (auto s = ctl::ParseSetArgs(req.args, &a); !s.ok()) return Response::Error(s);
  Runtime& rt = Runtime::Get();
  const int n = rt.devices().count();
  if (a.device && *a.device >= n) {
    return Response::Error(ErrorCode::kInval, "invalid argument 'device': no device " +
                                                  std::to_string(*a.device) +
                                                  " (the process sees " + std::to_string(n) + ")");
  }
  std::vector<int> targets, all;
  for (int v = 0; v < n; ++v) all.push_back(v);
  targets = a.device ? std::vector<int>{*a.device} : all;
  if (Response r = CheckSupported(a, targets); !r.ok) return r;
  // Root (the node's admin, and vgpud) may raise or lower; anyone else only lower.
  if (req.peer_uid != 0 || a.as_tenant) {
    if (Response r = CheckCeilings(a, targets); !r.ok) return r;
  }
  // The memory limit first: the only change that can be refused.
  if (a.memory_limit) {
    if (Response r = SetMemoryLimit(*a.memory_limit, targets); !r.ok) return r;
  }
  RuntimeSettings& settings = rt.settings();
  if (a.share_permille) {
    for (int v : targets) settings.set_share_permille(v, *a.share_permille);
  }
  if (a.weight) settings.set_weight(static_cast<uint32_t>(*a.weight));
  if (a.priority) {
    Config::Priority p = Config::Priority::kNormal;
    ParsePriorityName(*a.priority, &p);  // validated by ParseSetArgs
    settings.set_priority(p);
  }
  // Weight and priority are the process's: every device's slot follows.
  PushToScheduler(a.weight || a.priority ? all : targets);
  std::string line = ctl::DumpLine(req.args);
  line.pop_back();  // its '\n'
  VGPU_LOG(kInfo, "set by uid {}: {}", req.peer_uid, line.c_str());
  nlohmann::json result = ctl::ToJson(a);
  result["compute_policy"] = PolicyName(PolicyOn(0));
  return Response::Ok(result);
}

void FillRuntimeSettings(ctl::InfoResult* info) {
  Runtime& rt = Runtime::Get();
  const RuntimeSettings& s = rt.settings();
  info->priority = PriorityName(s.priority());
  info->weight = s.weight();
  info->compute_policy = PolicyName(PolicyOn(0));
  for (ctl::DeviceInfo& d : info->devices) {
    if (PolicyOn(d.index) == Config::ComputePolicy::kNative || s.share_permille(d.index) == 0) {
      continue;
    }
    d.compute_share = s.share_permille(d.index) / 10.0;
  }
}

}  // namespace vgpu
