// Harness of vgpu_bench_share: the tenant role, the orchestrator's runs of
// tenants on a fresh simulated node and their scoring. See share_harness.h.
#include "bench/share_harness.h"

#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

#include "common/config/config.h"
#include "share/sched_region.h"
#include "sim/node/node_region.h"

extern char** environ;

namespace vgpu::bench {
namespace {

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUntil(uint64_t t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000ull), static_cast<long>(t % 1'000'000'000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) ;
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

// ================================================================ tenant ==

constexpr int kReportFd = 3;  // tenant → orchestrator: "ready", then "result ..."
constexpr int kGoFd = 4;      // EOF on it releases the tenants

#define CK(call)                                                                   \
  do {                                                                             \
    CUresult rc_ = (call);                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                     \
      std::fprintf(stderr, "tenant %d: %s failed: %d\n", getpid(), #call, (int)rc_); \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

struct TenantArgs {
  std::string kind = "sat";  // sat | lat
  double run_s = 10;
  uint64_t kernel_ns = 1'000'000;
  uint64_t gap_ns = 3'000'000;
  double pause_at_s = -1, pause_for_s = 0;
  double warmup_s = 0;  // lat: samples in the first warmup_s are not kept
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

int TenantMain(const TenantArgs& a) {
  CK(cuInit(0));
  CUdevice dev = 0;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmodule mod = nullptr;
  CK(cuModuleLoad(&mod, "@builtin"));
  CUfunction fn = nullptr;
  CK(cuModuleGetFunction(&fn, mod, "vgpu_sim_sleep"));
  CUstream stream = nullptr;
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  unsigned long long ns = 0;
  void* params[] = {&ns};
  auto launch = [&](uint64_t k) {
    ns = k;
    CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  };
  launch(0);  // joins the scheduler (libvgpu) before the clock starts
  CK(cuStreamSynchronize(stream));
  WriteAll(kReportFd, "ready\n");
  char buf[16];
  for (ssize_t n = 1; n != 0;) {
    n = read(kGoFd, buf, sizeof buf);
    if (n < 0 && errno != EINTR) break;
  }
  uint64_t go = NowNs();
  uint64_t end = go + static_cast<uint64_t>(a.run_s * 1e9);
  std::ostringstream out;
  out << "result";
  uint64_t launches = 0;
  if (a.kind == "lat") {
    std::vector<double> lat;
    lat.reserve(static_cast<size_t>(a.run_s * 1e9 / static_cast<double>(a.gap_ns + a.kernel_ns)) + 16);
    uint64_t keep_from = go + static_cast<uint64_t>(a.warmup_s * 1e9);
    double warm_max = 0;
    while (NowNs() < end) {
      uint64_t t0 = NowNs();
      launch(a.kernel_ns);
      CK(cuStreamSynchronize(stream));
      uint64_t t1 = NowNs();
      if (t0 < keep_from) {
        warm_max = std::max(warm_max, static_cast<double>(t1 - t0) / 1e3);
      } else {
        lat.push_back(static_cast<double>(t1 - t0) / 1e3);
      }
      ++launches;
      SleepUntil(t1 + a.gap_ns);
    }
    out << " n=" << lat.size() << " p50_us=" << Percentile(lat, 0.5)
        << " p90_us=" << Percentile(lat, 0.9) << " p99_us=" << Percentile(lat, 0.99)
        << " max_us=" << Percentile(lat, 1.0) << " warmup_max_us=" << warm_max;
  } else if (a.kind == "probe") {
    // Launch calls of a burst mostly pass the gate's fast path (the lease is
    // held, the queue is short): their median is the per-launch cost.
    constexpr int kBurst = 32;
    std::vector<double> call_ns;
    call_ns.reserve(static_cast<size_t>(a.run_s * 1e9 / static_cast<double>(a.gap_ns)) * kBurst + kBurst);
    uint64_t keep_from = go + static_cast<uint64_t>(a.warmup_s * 1e9);
    while (NowNs() < end) {
      bool keep = NowNs() >= keep_from;
      for (int i = 0; i < kBurst; ++i) {
        uint64_t t0 = NowNs();
        launch(0);
        if (keep) call_ns.push_back(static_cast<double>(NowNs() - t0));
      }
      launches += kBurst;
      CK(cuStreamSynchronize(stream));
      SleepUntil(NowNs() + a.gap_ns);
    }
    out << " launch_p50_ns=" << Percentile(call_ns, 0.5) << " launch_p90_ns=" << Percentile(call_ns, 0.9);
  } else {
    bool paused = a.pause_at_s < 0;
    uint64_t pause_at = go + static_cast<uint64_t>(std::max(0.0, a.pause_at_s) * 1e9);
    for (uint64_t now = go; now < end; now = NowNs()) {
      if (!paused && now >= pause_at) {
        paused = true;
        out << " stop_ns=" << now;
        CK(cuStreamSynchronize(stream));
        out << " drained_ns=" << NowNs();
        SleepUntil(pause_at + static_cast<uint64_t>(a.pause_for_s * 1e9));
        out << " resume_ns=" << NowNs();
        continue;
      }
      launch(a.kernel_ns);
      ++launches;
    }
    CK(cuStreamSynchronize(stream));
  }
  out << " launches=" << launches << "\n";
  WriteAll(kReportFd, out.str());
  return 0;
}

// ========================================================== orchestrator ==

std::map<std::string, double> ParseResult(const std::string& line) {
  std::map<std::string, double> m;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq != std::string::npos) m[tok.substr(0, eq)] = std::atof(tok.c_str() + eq + 1);
  }
  return m;
}

bool ReadLine(int fd, std::string* line, uint64_t deadline) {
  line->clear();
  for (;;) {
    if (NowNs() > deadline) return false;
    char c;
    ssize_t n = read(fd, &c, 1);
    if (n == 1) {
      if (c == '\n') return true;
      line->push_back(c);
    } else if (n == 0) {
      return false;
    } else if (errno != EINTR && errno != EAGAIN) {
      return false;
    } else if (errno == EAGAIN) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

}  // namespace

int RunTenantRole(int argc, char** argv) {
  TenantArgs a;
  a.kind = argc > 2 ? argv[2] : "sat";
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--run-seconds") a.run_s = std::atof(v);
    else if (k == "--kernel-ns") a.kernel_ns = std::strtoull(v, nullptr, 10);
    else if (k == "--gap-ns") a.gap_ns = std::strtoull(v, nullptr, 10);
    else if (k == "--pause-at") a.pause_at_s = std::atof(v);
    else if (k == "--pause-for") a.pause_for_s = std::atof(v);
    else if (k == "--warmup") a.warmup_s = std::atof(v);
  }
  return TenantMain(a);
}

Harness::Harness(const Options& opt, std::string self) : opt_(opt), self_(std::move(self)) {}

void Harness::ReportError(const std::string& tag, const std::string& why) {
  std::fprintf(stderr, "share_bench: %s: %s\n", tag.c_str(), why.c_str());
  error_ = true;
}

RunResult Harness::RunTenants(const std::string& tag, const std::vector<TenantSpec>& tenants,
                              double run_s) {
  RunResult r;
  std::string node = "vgpu-bench-share-" + std::to_string(getpid()) + "-" +
                     std::to_string(++run_counter_) + "-" + tag;
  std::string sched = "/vgpu-sched-bench-" + std::to_string(getpid()) + "-" +
                      std::to_string(run_counter_);
  int go[2];
  if (pipe(go) != 0) return r;
  std::vector<pid_t> pids;
  std::vector<int> report;
  double tail_s = 0.4;  // tenants outlive the sampling, so their slots stay
  for (const auto& t : tenants) {
    int rep[2];
    if (pipe(rep) != 0) return r;
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string s = *e;
      if (s.rfind("VGPU_", 0) == 0 || s.rfind("LD_PRELOAD=", 0) == 0 ||
          s.rfind("LD_LIBRARY_PATH=", 0) == 0 || vgpu::IsConfigVariable(s.substr(0, s.find('=')))) {
        continue;
      }
      env.push_back(s);
    }
    const char* llp = std::getenv("LD_LIBRARY_PATH");
    env.push_back("LD_LIBRARY_PATH=" + opt_.sim_dir + (llp != nullptr && *llp ? std::string(":") + llp : ""));
    if (t.preload) env.push_back("LD_PRELOAD=" + opt_.libvgpu);
    env.push_back("VGPU_SIM_NODE=" + node);
    env.push_back("VGPU_SCHED_REGION=" + sched);
    for (const auto& e : t.env) env.push_back(e);
    uint64_t kernel = t.kernel_ns != 0 ? t.kernel_ns
                      : t.kind == "lat" ? opt_.lat_kernel_us * 1000 : opt_.kernel_us * 1000;
    uint64_t gap = t.gap_ns != 0 ? t.gap_ns : opt_.lat_gap_us * 1000;
    std::vector<std::string> args = {self_, "--tenant", t.kind,
                                     "--run-seconds", std::to_string(run_s + tail_s),
                                     "--kernel-ns", std::to_string(kernel),
                                     "--gap-ns", std::to_string(gap),
                                     "--pause-at", std::to_string(t.pause_at_s),
                                     "--pause-for", std::to_string(t.pause_for_s),
                                     "--warmup", std::to_string(opt_.warmup)};
    pid_t pid = fork();
    if (pid == 0) {
      dup2(rep[1], kReportFd);
      dup2(go[0], kGoFd);
      close_range(kGoFd + 1, ~0u, 0);  // the other tenants' pipes
      std::vector<char*> av, ev;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      for (auto& s : env) ev.push_back(s.data());
      ev.push_back(nullptr);
      execve(self_.c_str(), av.data(), ev.data());
      _exit(127);
    }
    close(rep[1]);
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    pids.push_back(pid);
    report.push_back(rep[0]);
  }
  close(go[0]);
  auto fail = [&](const std::string& why) {
    ReportError(tag, why);
    close(go[1]);
    for (pid_t p : pids) kill(p, SIGKILL);
  };
  bool ready = true;
  for (size_t i = 0; i < tenants.size() && ready; ++i) {
    std::string line;
    ready = ReadLine(report[i], &line, NowNs() + 30'000'000'000ull) && line == "ready";
  }
  std::string err;
  vgpu::sim::NodeRegion* region = ready ? vgpu::sim::NodeRegion::Attach(node, &err) : nullptr;
  std::vector<vgpu::sim::ProcessSlot*> slots(tenants.size(), nullptr);
  if (region != nullptr) {
    for (size_t i = 0; i < tenants.size(); ++i) {
      for (auto& s : region->header()->processes) {
        if (s.pid.load() == pids[i]) slots[i] = &s;
      }
    }
  }
  if (!ready || region == nullptr ||
      std::count(slots.begin(), slots.end(), nullptr) != 0) {
    fail(!ready ? "a tenant did not start" : region == nullptr ? "no node region: " + err
                                                               : "a tenant has no process slot");
  } else {
    std::unique_ptr<vgpu::SchedRegion> sr = std::move(vgpu::SchedRegion::Open(sched).value());
    auto& dev = region->device(0);
    auto take = [&](uint64_t t) {
      Sample s;
      uint64_t running = dev.running_since_ns.load();
      s.engine = dev.busy_ns.load();
      s.t = NowNs();
      if (running != 0 && running < s.t && dev.running_since_ns.load() == running) {
        s.engine += s.t - running;
      }
      (void)t;
      s.kernels = dev.kernels_run.load();
      s.lease_changes = sr != nullptr ? sr->device(0).gen.load() : 0;
      for (auto* p : slots) s.busy.push_back(p->busy_ns[0].load());
      return s;
    };
    close(go[1]);  // release
    r.go = NowNs();
    auto step = static_cast<uint64_t>(opt_.sample_ms * 1e6);
    size_t n = static_cast<size_t>(run_s * 1e9 / static_cast<double>(step));
    r.samples.reserve(n + 1);
    r.samples.push_back(take(r.go));
    for (size_t k = 1; k <= n; ++k) {
      SleepUntil(r.go + k * step);
      r.samples.push_back(take(r.go + k * step));
      if (opt_.verbose && sr != nullptr && k % static_cast<size_t>(std::max(1.0, 250 / opt_.sample_ms)) == 0) {
        auto& d = sr->device(0);
        std::printf("  [%6.2fs] holder=%d", static_cast<double>(r.samples.back().t - r.go) / 1e9,
                    d.holder.load());
        for (auto& g : d.groups) {
          if (g.key.load() != 0) {
            std::printf(" %s:tok=%.1fms", g.name, static_cast<double>(g.tokens_ns.load()) / 1e6);
          }
        }
        std::printf("\n");
      }
    }
    r.ok = true;
  }
  r.results.resize(tenants.size());
  for (size_t i = 0; i < tenants.size(); ++i) {
    std::string line;
    if (r.ok) {
      if (ReadLine(report[i], &line, NowNs() + 30'000'000'000ull) && line.rfind("result", 0) == 0) {
        r.results[i] = ParseResult(line);
      } else {
        fail("tenant " + tenants[i].name + " reported no result");
        r.ok = false;
      }
    }
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (r.ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fail("tenant " + tenants[i].name + " exited with status " + std::to_string(status));
      r.ok = false;
    }
    close(report[i]);
  }
  shm_unlink(vgpu::sim::NodeRegion::ShmName(node).c_str());
  shm_unlink(sched.c_str());
  return r;
}

// ---------------------------------------------------------- analysis --

size_t At(const RunResult& r, uint64_t t) {
  auto it = std::lower_bound(r.samples.begin(), r.samples.end(), t,
                             [](const Sample& s, uint64_t v) { return s.t < v; });
  return std::min<size_t>(static_cast<size_t>(it - r.samples.begin()), r.samples.size() - 1);
}

double Share(const RunResult& r, size_t tenant, size_t a, size_t b) {
  if (b <= a) return 0;
  return static_cast<double>(r.samples[b].busy[tenant] - r.samples[a].busy[tenant]) /
         static_cast<double>(r.samples[b].t - r.samples[a].t);
}

double Engine(const RunResult& r, size_t a, size_t b) {
  if (b <= a) return 0;
  return static_cast<double>(r.samples[b].engine - r.samples[a].engine) /
         static_cast<double>(r.samples[b].t - r.samples[a].t);
}

FILE* Harness::OpenCsv(const std::string& name) const {
  std::string path = opt_.out_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) std::fprintf(stderr, "share_bench: cannot write %s\n", path.c_str());
  else std::printf("  csv: %s\n", path.c_str());
  return f;
}

void Harness::WriteSeries(const std::string& scen, const std::vector<TenantSpec>& ts,
                          const RunResult& r) const {
  FILE* f = OpenCsv("share_" + scen + "_series.csv");
  if (f == nullptr) return;
  std::fprintf(f, "t_s");
  for (const auto& t : ts) std::fprintf(f, ",%s_pct", t.name.c_str());
  for (const auto& t : ts) std::fprintf(f, ",%s_avg500ms_pct", t.name.c_str());
  std::fprintf(f, ",engine_pct\n");
  const uint64_t step = 100'000'000, half = 250'000'000;
  for (uint64_t t = r.go; t + step <= r.samples.back().t; t += step) {
    size_t a = At(r, t), b = At(r, t + step);
    uint64_t mid = t + step / 2;
    size_t sa = At(r, mid > r.go + half ? mid - half : r.go), sb = At(r, mid + half);
    std::fprintf(f, "%.2f", static_cast<double>(mid - r.go) / 1e9);
    for (size_t i = 0; i < ts.size(); ++i) std::fprintf(f, ",%.2f", 100 * Share(r, i, a, b));
    for (size_t i = 0; i < ts.size(); ++i) std::fprintf(f, ",%.2f", 100 * Share(r, i, sa, sb));
    std::fprintf(f, ",%.2f\n", 100 * Engine(r, a, b));
  }
  std::fclose(f);
}

ShareVerdict Harness::ScoreWindows(const std::string& scen, const std::vector<TenantSpec>& ts,
                                   const RunResult& r, double window_tol, double run_tol,
                                   const std::function<double(double, double, size_t)>& target)
    const {
  ShareVerdict v;
  FILE* f = OpenCsv("share_" + scen + "_windows.csv");
  if (f != nullptr) {
    std::fprintf(f, "window,t_start_s,t_end_s");
    for (const auto& t : ts) {
      std::fprintf(f, ",%s_pct,%s_target_pct,%s_err_pp", t.name.c_str(), t.name.c_str(), t.name.c_str());
    }
    std::fprintf(f, ",engine_pct,max_abs_err_pp\n");
  }
  std::printf("  %-6s %-13s", "window", "t (s)");
  for (const auto& t : ts) std::printf(" %14s", (t.name + " % (tgt)").c_str());
  std::printf(" %8s %9s\n", "engine%", "max|err|");
  auto start = r.go + static_cast<uint64_t>(opt_.warmup * 1e9);
  int w = 0;
  for (uint64_t t = start; t + 1'000'000'000 <= r.samples.back().t + 1'000'000; t += 1'000'000'000, ++w) {
    size_t a = At(r, t), b = At(r, t + 1'000'000'000);
    double t0 = static_cast<double>(r.samples[a].t - r.go) / 1e9;
    double t1 = static_cast<double>(r.samples[b].t - r.go) / 1e9;
    double worst = 0, worst_busy = 0;
    double eng = Engine(r, a, b);
    std::printf("  %-6d %5.2f-%6.2f ", w, t0, t1);
    if (f != nullptr) std::fprintf(f, "%d,%.3f,%.3f", w, t0, t1);
    bool scored = false;
    for (size_t i = 0; i < ts.size(); ++i) {
      double s = 100 * Share(r, i, a, b);
      double tg = target(t0, t1, i);
      if (tg >= 0) {
        double e = s - 100 * tg;
        worst = std::max(worst, std::fabs(e));
        if (eng > 0) worst_busy = std::max(worst_busy, std::fabs(s / eng - 100 * tg));
        scored = true;
        std::printf(" %6.2f (%5.1f)", s, 100 * tg);
        if (f != nullptr) std::fprintf(f, ",%.3f,%.1f,%.3f", s, 100 * tg, e);
      } else {
        std::printf(" %6.2f (  -  )", s);
        if (f != nullptr) std::fprintf(f, ",%.3f,,", s);
      }
    }
    v.max_window_err = std::max(v.max_window_err, worst);
    v.max_window_err_busy = std::max(v.max_window_err_busy, worst_busy);
    std::printf(" %8.2f %9s\n", 100 * Engine(r, a, b),
                scored ? (std::to_string(worst).substr(0, 5)).c_str() : "-");
    if (f != nullptr) {
      std::fprintf(f, ",%.3f,", 100 * Engine(r, a, b));
      if (scored) std::fprintf(f, "%.3f", worst);
      std::fprintf(f, "\n");
    }
  }
  if (f != nullptr) std::fclose(f);
  // Whole run (after warm-up), for tenants with a constant target.
  size_t a = At(r, start), b = r.samples.size() - 1;
  double t0 = static_cast<double>(r.samples[a].t - r.go) / 1e9;
  double t1 = static_cast<double>(r.samples[b].t - r.go) / 1e9;
  std::printf("  whole run %.1f-%.1f s:", t0, t1);
  double eng = Engine(r, a, b);
  for (size_t i = 0; i < ts.size(); ++i) {
    double s = 100 * Share(r, i, a, b);
    v.run_share.push_back(s);
    double tg = ts[i].target;
    if (tg >= 0) {
      v.max_run_err = std::max(v.max_run_err, std::fabs(s - 100 * tg));
      if (eng > 0) v.max_run_err_busy = std::max(v.max_run_err_busy, std::fabs(s / eng - 100 * tg));
      std::printf(" %s %.2f%% (target %.1f, err %+.2f pp)", ts[i].name.c_str(), s, 100 * tg, s - 100 * tg);
    } else {
      std::printf(" %s %.2f%%", ts[i].name.c_str(), s);
    }
  }
  std::printf(", engine busy %.2f%%\n", 100 * Engine(r, a, b));
  v.pass = v.max_window_err <= window_tol && v.max_run_err <= run_tol;
  if (run_tol > 100) {  // phases: windows only
    std::printf("  max |error| per 1 s window inside a phase: %.2f pp (target <= %.0f) -> %s\n",
                v.max_window_err, window_tol, v.pass ? "PASS" : "FAIL");
    return v;
  }
  std::printf("  max |error| per 1 s window: %.2f pp (target <= %.0f), whole run: %.2f pp (target <= %.0f)"
              " -> %s\n", v.max_window_err, window_tol, v.max_run_err, run_tol, v.pass ? "PASS" : "FAIL");
  if (ts.size() > 1) {
    std::printf("  as shares of engine busy time: run");
    for (size_t i = 0; i < ts.size(); ++i) std::printf(" %s%.2f", i ? "/" : "", eng > 0 ? v.run_share[i] / eng : 0);
    std::printf("; max |error| per window %.2f pp, whole run %.2f pp\n", v.max_window_err_busy,
                v.max_run_err_busy);
  }
  return v;
}

}  // namespace vgpu::bench
