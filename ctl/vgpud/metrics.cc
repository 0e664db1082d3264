#include "ctl/vgpud/metrics.h"

#include <algorithm>
#include <httplib.h>

#include <map>
#include <sstream>
#include <thread>

#include "common/counters.h"
#include "ctl/vgpud/coordinator.h"

namespace vgpu::vgpud {
namespace {

// Label values escaped as the exposition format requires.
std::string Esc(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Writer {
 public:
  void Family(const std::string& name, const char* type, const std::string& help) {
    os_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void Sample(const std::string& name, const std::string& labels, double v) {
    os_ << name;
    if (!labels.empty()) os_ << '{' << labels << '}';
    os_ << ' ' << v << '\n';
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

// claim, pod and slurm_job only when the job has them: an empty label is an absent one
// to Prometheus, and jobs outside Kubernetes keep their series as they were.
std::string JobLabels(const Job& j) {
  std::string out = "pid=\"" + std::to_string(j.pid) + "\",command=\"" + Esc(j.command) + "\"";
  if (!j.claim.empty()) out += ",claim=\"" + Esc(j.claim) + "\"";
  if (!j.pod.empty()) out += ",pod=\"" + Esc(j.pod) + "\"";
  if (!j.slurm_job.empty()) out += ",slurm_job=\"" + Esc(j.slurm_job) + "\"";
  return out;
}

void JobMetrics(Writer* w, const std::vector<Job>& jobs) {
  w->Family("vgpu_job_memory_used_bytes", "gauge", "Device memory a job holds on a device now.");
  for (const Job& j : jobs)
    for (const JobDevice& d : j.devices)
      w->Sample("vgpu_job_memory_used_bytes", JobLabels(j) + ",device=\"" + Esc(d.uuid) + "\"", static_cast<double>(d.used));
  w->Family("vgpu_job_memory_footprint_bytes", "gauge", "Device memory a job needs when resident.");
  for (const Job& j : jobs)
    for (const JobDevice& d : j.devices)
      w->Sample("vgpu_job_memory_footprint_bytes", JobLabels(j) + ",device=\"" + Esc(d.uuid) + "\"", static_cast<double>(d.footprint));
  w->Family("vgpu_job_memory_limit_bytes", "gauge", "A job's device memory quota (absent: unlimited).");
  for (const Job& j : jobs)
    for (const JobDevice& d : j.devices)
      if (d.quota != 0) w->Sample("vgpu_job_memory_limit_bytes", JobLabels(j) + ",device=\"" + Esc(d.uuid) + "\"", static_cast<double>(d.quota));
  w->Family("vgpu_job_state", "gauge", "1 for the job's state.");
  for (const Job& j : jobs) {
    for (JobState s : {JobState::kRunning, JobState::kSuspended, JobState::kCheckpointed, JobState::kWaiting}) {
      w->Sample("vgpu_job_state", JobLabels(j) + ",state=\"" + JobStateName(s) + "\"", j.state == s ? 1 : 0);
    }
  }
  w->Family("vgpu_job_compute_share_percent", "gauge", "A job's configured compute share (0: unlimited).");
  for (const Job& j : jobs) w->Sample("vgpu_job_compute_share_percent", JobLabels(j), j.compute_share);
  w->Family("vgpu_job_compute_share_achieved_ratio", "gauge",
            "Device time the job's work used per wall second, over vgpud's last refresh interval (governed jobs only).");
  for (const Job& j : jobs) {
    if (j.achieved_share >= 0) w->Sample("vgpu_job_compute_share_achieved_ratio", JobLabels(j), j.achieved_share);
  }
  w->Family("vgpu_job_suspensions_total", "counter", "Times vgpud suspended the job.");
  for (const Job& j : jobs) w->Sample("vgpu_job_suspensions_total", JobLabels(j), static_cast<double>(j.suspensions));
  w->Family("vgpu_job_migrations_total", "counter", "Times vgpud moved the job to another GPU.");
  for (const Job& j : jobs) w->Sample("vgpu_job_migrations_total", JobLabels(j), static_cast<double>(j.migrations));
  w->Family("vgpu_job_preemptions_total", "counter", "Suspensions for a higher-priority job.");
  for (const Job& j : jobs) w->Sample("vgpu_job_preemptions_total", JobLabels(j), static_cast<double>(j.preemptions));
  w->Family("vgpu_job_moved_bytes_total", "counter", "Bytes vgpud's decisions copied out of and back into the device.");
  for (const Job& j : jobs) w->Sample("vgpu_job_moved_bytes_total", JobLabels(j), static_cast<double>(j.bytes_moved));
  // libvgpu's own counters, one family each (common/counters.h).
  // Prometheus wants base units: nanosecond counters are exported in seconds.
  for (size_t i = 0; i < counters::kCount; ++i) {
    std::string base = counters::kInfo[i].name;
    const bool ns = std::string(counters::kInfo[i].unit) == "ns";
    if (ns && base.size() > 3 && base.compare(base.size() - 3, 3, "_ns") == 0) {
      base = base.substr(0, base.size() - 3) + "_seconds";
    }
    const std::string name = "vgpu_lib_" + base + "_total";
    w->Family(name, "counter", counters::kInfo[i].help);
    for (const Job& j : jobs) {
      for (const auto& [n, v] : j.counters) {
        if (n == counters::kInfo[i].name) w->Sample(name, JobLabels(j), ns ? static_cast<double>(v) / 1e9 : static_cast<double>(v));
      }
    }
  }
}

}  // namespace

std::string RenderMetrics(const std::vector<Job>& jobs, const std::vector<GpuMemory>& gpus,
                          bool oversubscribe, const std::vector<std::string>& drained) {
  Writer w;
  JobMetrics(&w, jobs);
  w.Family("vgpu_device_memory_used_bytes", "gauge", "Physical device memory in use.");
  for (const GpuMemory& g : gpus) w.Sample("vgpu_device_memory_used_bytes", "device=\"" + Esc(g.uuid) + "\"", static_cast<double>(g.used));
  w.Family("vgpu_device_memory_total_bytes", "gauge", "Physical device memory.");
  for (const GpuMemory& g : gpus) w.Sample("vgpu_device_memory_total_bytes", "device=\"" + Esc(g.uuid) + "\"", static_cast<double>(g.total));
  w.Family("vgpu_device_oversubscription_ratio", "gauge", "Footprint of all jobs on the device over its memory.");
  for (const GpuMemory& g : gpus) {
    uint64_t need = 0;
    for (const Job& j : jobs) need += j.FootprintOn(g.uuid);
    w.Sample("vgpu_device_oversubscription_ratio", "device=\"" + Esc(g.uuid) + "\"", g.total == 0 ? 0 : static_cast<double>(need) / static_cast<double>(g.total));
  }
  w.Family("vgpu_device_drained", "gauge", "1 while the device is drained (vgpuctl drain).");
  for (const GpuMemory& g : gpus) {
    const bool on = std::find(drained.begin(), drained.end(), g.uuid) != drained.end();
    w.Sample("vgpu_device_drained", "device=\"" + Esc(g.uuid) + "\"", on ? 1 : 0);
  }
  w.Family("vgpu_oversubscription_enabled", "gauge", "1 when vgpud time-slices devices whose jobs do not fit.");
  w.Sample("vgpu_oversubscription_enabled", "", oversubscribe ? 1 : 0);
  return w.str();
}

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
};

MetricsServer::MetricsServer(Coordinator* c, bool oversubscribe) : impl_(std::make_unique<Impl>()) {
  impl_->server.Get("/metrics", [c, oversubscribe](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(c->Jobs(), c->gpus().Read(), oversubscribe, c->Drained()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
}

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const int port = std::stoi(listen.substr(colon + 1));
  if (!impl_->server.bind_to_port(host, port)) {
    return Status::Error(ErrorCode::kIo, "metrics: cannot listen on " + listen);
  }
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (impl_ && impl_->thread.joinable()) {
    impl_->server.stop();
    impl_->thread.join();
  }
}

}  // namespace vgpu::vgpud
