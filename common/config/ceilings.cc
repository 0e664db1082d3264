#include "common/config/ceilings.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "common/config/config_file.h"

namespace vgpu::config_internal {
namespace {

// One admin file being applied to the tenant's configuration.
class Ceiling {
 public:
  Ceiling(const std::string& path, LoadState* user, const LoadState* admin)
      : source_(std::string(kAdminFileKind) + " '" + Printable(path) + "'"),
        user_(user),
        admin_(admin),
        u_(user->cfg),
        a_(admin->cfg) {}

  const std::string& source() const { return source_; }

  // Options the admin fixes: the tenant may not choose another value.
  void Fix(const char* env, bool differs, const std::function<void()>& copy) {
    const size_t o = OptionIndex(env);
    if (!admin_->set[o]) return;
    if (user_->set[o] && differs) Refuse(o, "is fixed to '" + admin_->text[o] + "'");
    copy();
    Take(o);
  }

  void ComputePolicy() {
    const size_t o = OptionIndex("VGPU_COMPUTE_POLICY");
    // A share or weight of the admin's is a policy too: "native" would escape it.
    if (!admin_->set[o] && a_->EffectivePolicy() == Config::ComputePolicy::kNative) return;
    // A policy the admin implies (fixed by a share) may be named explicitly.
    const Config::ComputePolicy in_force =
        admin_->set[o] ? a_->compute_policy : a_->EffectivePolicy();
    const bool same = u_->compute_policy == in_force || u_->compute_policy == a_->compute_policy;
    if (user_->set[o] && !same) {
      Refuse(o, "would change the compute policy that " + source_ + " sets");
    }
    if (!same) u_->compute_policy = a_->compute_policy;
    if (admin_->set[o]) Take(o);
  }

  void Priority() {
    const size_t o = OptionIndex("VGPU_PRIORITY");
    if (u_->priority <= a_->priority) return;
    if (user_->set[o]) Refuse(o, AboveText(PriorityName(a_->priority)));
    u_->priority = a_->priority;
    Take(o);
  }

  // Not being preempted is a privilege over every other job on the node: the
  // admin's value when it sets one, else the default (preemptible).
  void Preemptible() {
    const size_t o = OptionIndex("VGPU_PREEMPTIBLE");
    if (admin_->set[o]) {
      Fix("VGPU_PREEMPTIBLE", u_->preemptible != a_->preemptible,
          [this] { u_->preemptible = a_->preemptible; });
      return;
    }
    if (u_->preemptible) return;
    if (user_->set[o]) Refuse(o, "would exempt the job from preemption, which only an admin may");
    u_->preemptible = true;
    Take(o);
  }

  void Weight() {
    const size_t o = OptionIndex("VGPU_COMPUTE_WEIGHT");
    const uint32_t cap = a_->WeightCeiling();
    if (std::max<uint32_t>(1, u_->compute_weight) <= cap) return;
    if (user_->set[o]) Refuse(o, AboveText(std::to_string(cap)));
    u_->compute_weight = cap;
    Take(o);
  }

  // Memory and shares are per device: applied by LimitFor and ShareFor; here
  // only the message for a value above the ceiling on some device.
  void MemoryLimit() {
    PerDevice("VGPU_DEVICE_MEMORY_LIMIT", [this](int i) {
      return InRange(*u_, i) && InRange(*a_, i) && u_->RequestedLimitFor(i) > a_->LimitFor(i);
    });
  }

  void Share() {
    PerDevice("VGPU_COMPUTE_SHARE", [this](int i) {
      const uint32_t cap = a_->ShareFor(i), asked = u_->RequestedShareFor(i);
      return cap != 0 && (asked == 0 || asked > cap);
    });
  }

 private:
  // A per-device option: the tenant's value stays where it is tighter;
  // `raises(i)`: it is not on visible device i.
  void PerDevice(const char* env, const std::function<bool(int)>& raises) {
    const size_t o = OptionIndex(env);
    if (!admin_->set[o]) return;
    bool raised = false;
    for (int i = 0; i < Config::kMaxDevices && user_->set[o] && !raised; ++i) raised = raises(i);
    if (raised) Refuse(o, AboveText(admin_->text[o]));
    if (raised || !user_->set[o]) Take(o);
  }
  static bool InRange(const Config& c, int i) {
    return c.memory_limits.empty() || static_cast<size_t>(i) < c.memory_limits.size();
  }
  std::string AboveText(const std::string& cap) const {
    return "is above the ceiling '" + cap + "' that " + source_ + " sets";
  }
  void Refuse(size_t o, const std::string& why) {
    u_->refusals.push_back(user_->origin[o] + "='" + Printable(user_->text[o]) + "' refused: it " +
                           why + "; the ceiling applies");
  }
  // The admin's value is the one in force.
  void Take(size_t o) {
    user_->origin[o] = admin_->set[o] ? admin_->origin[o] : source_ + " (ceiling)";
    user_->text[o] = admin_->text[o];
  }

  std::string source_;
  LoadState* user_;
  const LoadState* admin_;
  Config* u_;
  const Config* a_;
};

}  // namespace

Status ApplyCeilingFile(const std::string& path, LoadState* user) {
  auto admin = std::make_shared<Config>();
  LoadState ast{admin.get()};
  if (Status s = ApplyJsonFile(path, &ast, kAdminFileKind); !s.ok()) return s;
  Config* u = user->cfg;
  Ceiling c(path, user, &ast);
  c.Fix("VGPU_GROUP", u->group != admin->group, [&] { u->group = admin->group; });
  c.Fix("VGPU_SCHED_REGION", u->sched_region != admin->sched_region,
        [&] { u->sched_region = admin->sched_region; });
  c.Fix("VGPU_VISIBLE_DEVICES", u->visible_devices != admin->visible_devices, [&] {
    u->visible_devices = admin->visible_devices;
    u->visible_devices_set = admin->visible_devices_set;
  });
  // Labels: a tenant must not pass for another claim, pod or Slurm job.
  c.Fix("VGPU_CLAIM", u->claim != admin->claim, [&] { u->claim = admin->claim; });
  c.Fix("VGPU_POD", u->pod != admin->pod, [&] { u->pod = admin->pod; });
  c.Fix("VGPU_SLURM_JOB", u->slurm_job != admin->slurm_job,
        [&] { u->slurm_job = admin->slurm_job; });
  c.ComputePolicy();
  c.Priority();
  c.Preemptible();
  // The admin's suspend on SIGTSTP (a preempting job needs the memory back).
  c.Fix("VGPU_SUSPEND_ON_SIGTSTP", u->suspend_on_sigtstp != admin->suspend_on_sigtstp,
        [&] { u->suspend_on_sigtstp = admin->suspend_on_sigtstp; });
  c.Weight();
  c.MemoryLimit();
  c.Share();
  for (size_t i = 0; i < ast.set.size(); ++i) {
    u->configured = u->configured || (ast.set[i] && OptionTable()[i].policy);
  }
  u->ceilings.push_back({c.source(), std::move(admin)});
  return Status::Ok();
}

}  // namespace vgpu::config_internal
