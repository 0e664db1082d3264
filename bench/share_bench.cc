// Compute-share accuracy on the simulated node (issue 4, "Measured on the
// simulated node"; figures in docs/performance.md, section "Compute share").
//
// One binary, two roles:
//   - the orchestrator (default): for each scenario it starts tenant processes
//     (this binary again, with --tenant) on a fresh simulated node
//     (VGPU_SIM_NODE) and a fresh scheduler region (VGPU_SCHED_REGION), each
//     under LD_PRELOAD=libvgpu.so with its own VGPU_* settings, releases them
//     at once, samples every tenant's engine time, prints the shares and
//     writes CSV files; it removes the node and scheduler regions afterwards;
//   - a tenant (--tenant sat|lat): a saturating launcher (back-to-back
//     vgpu_sim_sleep kernels on one stream; optionally idle for a while and
//     return) or a latency-sensitive one (a short kernel, synchronize, record
//     launch→sync latency, sleep a gap, repeat).
//
// Ground truth is the simulated GPU's own accounting, not libvgpu's: the node
// region's ProcessSlot::busy_ns[0] (engine time of each process's finished
// kernels) and DeviceState busy_ns + running_since_ns (engine busy, exact to
// the sample instant). The orchestrator attaches read-only and samples every
// --sample-ms (default 10 ms); shares are Δbusy / Δwall per window. The first
// --warmup seconds (default 1) after the tenants are released are not scored.
//
// Exit status: 0 when every scenario ran (PASS/FAIL against the targets is
// printed, never turned into the exit status: the machine is shared and
// noisy), 1 on a harness error (a tenant failed, a region did not appear).
#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/sched_region.h"
#include "sim/node_region.h"

#ifndef VGPU_BENCH_LIBVGPU
#define VGPU_BENCH_LIBVGPU "libvgpu.so"
#endif
#ifndef VGPU_BENCH_SIM_LIB_DIR
#define VGPU_BENCH_SIM_LIB_DIR ""
#endif

extern char** environ;

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

struct Options {
  std::string scenario = "all";
  double seconds = 10;
  double warmup = 1;
  double sample_ms = 10;
  uint64_t kernel_us = 1000;
  uint64_t lat_kernel_us = 200;
  uint64_t lat_gap_us = 3000;
  int rounds = 1;
  std::string out_dir = ".";
  std::string libvgpu = VGPU_BENCH_LIBVGPU;
  std::string sim_dir = VGPU_BENCH_SIM_LIB_DIR;
  bool verbose = false;
};

Options g_opt;
std::string g_self;
int g_run_counter = 0;
bool g_harness_error = false;

struct TenantSpec {
  std::string name;
  std::string kind = "sat";
  std::vector<std::string> env;  // VGPU_* of this tenant
  bool preload = true;           // false: no libvgpu at all
  double target = -1;            // expected share (fraction)
  double pause_at_s = -1, pause_for_s = 0;  // after release (not after warm-up)
  uint64_t kernel_ns = 0;        // 0: default for the kind
  uint64_t gap_ns = 0;
};

struct Sample {
  uint64_t t;
  uint64_t engine;              // device busy, exact to t
  std::vector<uint64_t> busy;   // per tenant, finished kernels
};

struct RunResult {
  bool ok = false;
  uint64_t go = 0;
  std::vector<Sample> samples;
  std::vector<std::map<std::string, double>> results;  // per tenant, from its "result" line
};

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

// Runs one set of tenants for `run_s` seconds after release and samples them.
RunResult RunTenants(const std::string& tag, const std::vector<TenantSpec>& tenants, double run_s) {
  RunResult r;
  std::string node = "vgpu-bench-share-" + std::to_string(getpid()) + "-" +
                     std::to_string(++g_run_counter) + "-" + tag;
  std::string sched = "/vgpu-sched-bench-" + std::to_string(getpid()) + "-" +
                      std::to_string(g_run_counter);
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
          s.rfind("LD_LIBRARY_PATH=", 0) == 0 || s.rfind("CUDA_DEVICE_SM_LIMIT=", 0) == 0) {
        continue;
      }
      env.push_back(s);
    }
    const char* llp = std::getenv("LD_LIBRARY_PATH");
    env.push_back("LD_LIBRARY_PATH=" + g_opt.sim_dir + (llp != nullptr && *llp ? std::string(":") + llp : ""));
    if (t.preload) env.push_back("LD_PRELOAD=" + g_opt.libvgpu);
    env.push_back("VGPU_SIM_NODE=" + node);
    env.push_back("VGPU_SCHED_REGION=" + sched);
    for (const auto& e : t.env) env.push_back(e);
    uint64_t kernel = t.kernel_ns != 0 ? t.kernel_ns
                      : t.kind == "lat" ? g_opt.lat_kernel_us * 1000 : g_opt.kernel_us * 1000;
    uint64_t gap = t.gap_ns != 0 ? t.gap_ns : g_opt.lat_gap_us * 1000;
    std::vector<std::string> args = {g_self, "--tenant", t.kind,
                                     "--run-seconds", std::to_string(run_s + tail_s),
                                     "--kernel-ns", std::to_string(kernel),
                                     "--gap-ns", std::to_string(gap),
                                     "--pause-at", std::to_string(t.pause_at_s),
                                     "--pause-for", std::to_string(t.pause_for_s),
                                     "--warmup", std::to_string(g_opt.warmup)};
    pid_t pid = fork();
    if (pid == 0) {
      dup2(rep[1], kReportFd);
      dup2(go[0], kGoFd);
      for (int fd = kGoFd + 1; fd < 256; ++fd) close(fd);
      std::vector<char*> av, ev;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      for (auto& s : env) ev.push_back(s.data());
      ev.push_back(nullptr);
      execve(g_self.c_str(), av.data(), ev.data());
      _exit(127);
    }
    close(rep[1]);
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    pids.push_back(pid);
    report.push_back(rep[0]);
  }
  close(go[0]);
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "share_bench: %s: %s\n", tag.c_str(), why.c_str());
    g_harness_error = true;
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
    std::unique_ptr<vgpu::SchedRegion> sr;
    if (g_opt.verbose) sr = vgpu::SchedRegion::Open(sched, &err);
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
      for (auto* p : slots) s.busy.push_back(p->busy_ns[0].load());
      return s;
    };
    close(go[1]);  // release
    r.go = NowNs();
    auto step = static_cast<uint64_t>(g_opt.sample_ms * 1e6);
    size_t n = static_cast<size_t>(run_s * 1e9 / static_cast<double>(step));
    r.samples.reserve(n + 1);
    r.samples.push_back(take(r.go));
    for (size_t k = 1; k <= n; ++k) {
      SleepUntil(r.go + k * step);
      r.samples.push_back(take(r.go + k * step));
      if (sr != nullptr && k % static_cast<size_t>(std::max(1.0, 250 / g_opt.sample_ms)) == 0) {
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

// Index of the first sample at or after time t (ns).
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

FILE* OpenCsv(const std::string& name) {
  std::string path = g_opt.out_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) std::fprintf(stderr, "share_bench: cannot write %s\n", path.c_str());
  else std::printf("  csv: %s\n", path.c_str());
  return f;
}

// Series at 100 ms resolution (for plots): share of each tenant in each
// 100 ms interval, the same averaged over a centred 500 ms window, and the
// engine busy fraction.
void WriteSeries(const std::string& scen, const std::vector<TenantSpec>& ts, const RunResult& r) {
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

struct ShareVerdict {
  double max_window_err = 0;  // pp
  double max_run_err = 0;     // pp
  // The same, with shares taken of the engine's busy time instead of wall
  // time (what the scheduler split, handover idle time removed).
  double max_window_err_busy = 0;
  double max_run_err_busy = 0;
  std::vector<double> run_share;
  bool pass = false;
};

// Scores 1 s windows from warm-up to the end against each tenant's target
// (targets(window start, tenant) < 0: window not scored for that tenant).
ShareVerdict ScoreWindows(const std::string& scen, const std::vector<TenantSpec>& ts,
                          const RunResult& r, double window_tol, double run_tol,
                          const std::function<double(double, double, size_t)>& target) {
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
  auto start = r.go + static_cast<uint64_t>(g_opt.warmup * 1e9);
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

std::vector<std::pair<std::string, std::string>> g_summary;  // scenario → one line

void Summary(const std::string& scen, const std::string& line) {
  g_summary.emplace_back(scen, line);
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

TenantSpec Sat(const std::string& name, std::vector<std::string> env, double target) {
  TenantSpec t;
  t.name = name;
  t.env = std::move(env);
  t.target = target;
  return t;
}

// Scenarios 1-5: saturating tenants with constant targets.
void SteadyScenario(const std::string& scen, const std::vector<TenantSpec>& ts, double window_tol,
                    double run_tol) {
  std::printf("\n== %s: %zu saturating tenants, %.0f s scored after %.1f s warm-up, %llu us kernels ==\n",
              scen.c_str(), ts.size(), g_opt.seconds, g_opt.warmup,
              static_cast<unsigned long long>(g_opt.kernel_us));
  for (const auto& t : ts) {
    std::printf("  tenant %s:", t.name.c_str());
    for (const auto& e : t.env) std::printf(" %s", e.c_str());
    std::printf("\n");
  }
  RunResult r = RunTenants(scen, ts, g_opt.warmup + g_opt.seconds);
  if (!r.ok) return;
  WriteSeries(scen, ts, r);
  ShareVerdict v = ScoreWindows(scen, ts, r, window_tol, run_tol,
                                [&](double, double, size_t i) { return ts[i].target; });
  std::string shares;
  for (size_t i = 0; i < ts.size(); ++i) {
    shares += Fmt("%s%.2f", i ? "/" : "", v.run_share[i]);
  }
  std::string busy = ts.size() > 1 ? Fmt("; of engine busy: window %.2f, run %.2f pp", v.max_window_err_busy,
                                         v.max_run_err_busy)
                                   : "";
  Summary(scen, Fmt("shares %s; max window err %.2f pp (<=%.0f), run err %.2f pp (<=%.0f) over %.0f s: %s%s",
                    shares.c_str(), v.max_window_err, window_tol, v.max_run_err, run_tol,
                    g_opt.seconds, v.pass ? "PASS" : "FAIL", busy.c_str()));
}

// Scenario 6: weighted 1:3:6; the weight-6 tenant idles for the middle third.
void ConserveScenario() {
  const std::string scen = "conserve-1-3-6";
  double third = g_opt.seconds / 3;
  double stop_at = g_opt.warmup + third, back_at = g_opt.warmup + 2 * third;
  std::vector<TenantSpec> ts = {Sat("w1", {"VGPU_COMPUTE_WEIGHT=1"}, -1),
                                Sat("w3", {"VGPU_COMPUTE_WEIGHT=3"}, -1),
                                Sat("w6", {"VGPU_COMPUTE_WEIGHT=6"}, -1)};
  ts[2].pause_at_s = stop_at;
  ts[2].pause_for_s = third;
  std::printf("\n== %s: weights 1:3:6, w6 idles %.1f-%.1f s, %.0f s after %.1f s warm-up ==\n",
              scen.c_str(), stop_at, back_at, g_opt.seconds, g_opt.warmup);
  RunResult r = RunTenants(scen, ts, g_opt.warmup + g_opt.seconds);
  if (!r.ok) return;
  auto& res = r.results[2];
  if (res.count("stop_ns") == 0 || res.count("resume_ns") == 0) {
    std::fprintf(stderr, "share_bench: %s: w6 did not report its pause\n", scen.c_str());
    g_harness_error = true;
    return;
  }
  auto stop = static_cast<uint64_t>(res["stop_ns"]);
  auto drained = static_cast<uint64_t>(res["drained_ns"]);
  auto resume = static_cast<uint64_t>(res["resume_ns"]);
  double ts_stop = static_cast<double>(stop - r.go) / 1e9;
  double ts_back = static_cast<double>(resume - r.go) / 1e9;
  WriteSeries(scen, ts, r);
  // Windows wholly inside a phase are scored against that phase's shares.
  ShareVerdict v = ScoreWindows(scen, ts, r, 2, 1e9, [&](double t0, double t1, size_t i) -> double {
    static const double both[] = {0.1, 0.3, 0.6}, alone[] = {0.25, 0.75, 0.0};
    if (t1 <= ts_stop) return both[i];
    if (t0 >= ts_stop && t1 <= ts_back) return alone[i];
    if (t0 >= ts_back) return both[i];
    return -1;
  });
  // Work conservation, at the sampling resolution.
  FILE* f = OpenCsv("share_" + scen + "_transitions.csv");
  if (f != nullptr) std::fprintf(f, "t_rel_ms,event,others_busy_pct,engine_pct,w6_pct\n");
  auto others = [&](size_t k) {
    // Engine time of w1+w3 in (k-1, k]: exact engine busy minus w6's finished kernels.
    double eng = static_cast<double>(r.samples[k].engine - r.samples[k - 1].engine);
    double w6 = static_cast<double>(r.samples[k].busy[2] - r.samples[k - 1].busy[2]);
    double dt = static_cast<double>(r.samples[k].t - r.samples[k - 1].t);
    double fin = static_cast<double>((r.samples[k].busy[0] - r.samples[k - 1].busy[0]) +
                                     (r.samples[k].busy[1] - r.samples[k - 1].busy[1]));
    (void)fin;
    return std::max(0.0, eng - w6) / dt;
  };
  size_t k0 = At(r, stop);
  double reach_ms = -1;
  for (size_t k = std::max<size_t>(k0, 1); k < r.samples.size(); ++k) {
    double o = others(k);
    double rel = (static_cast<double>(r.samples[k].t) - static_cast<double>(stop)) / 1e6;
    if (f != nullptr && rel <= 300) {
      std::fprintf(f, "%.1f,stop,%.2f,%.2f,%.2f\n", rel, 100 * o, 100 * Engine(r, k - 1, k),
                   100 * Share(r, 2, k - 1, k));
    }
    if (reach_ms < 0 && o >= 0.95 && r.samples[k - 1].t >= stop) reach_ms = rel;
    if (rel > 300 && reach_ms >= 0) break;
  }
  // Others' busy over the first 50 ms and the first second after the stop.
  double first50 = Engine(r, At(r, stop), At(r, stop + 50'000'000));
  double others_1s = Share(r, 0, At(r, stop), At(r, stop + 1'000'000'000)) +
                     Share(r, 1, At(r, stop), At(r, stop + 1'000'000'000));
  // Return: w6's first engine time, and how soon its share since return
  // stays within 2 pp of 60% (cumulative since return, checked for 1 s).
  size_t kb = At(r, resume);
  double first_ms = -1;
  for (size_t k = kb; k < r.samples.size(); ++k) {
    if (r.samples[k].busy[2] > r.samples[kb].busy[2]) {
      first_ms = (static_cast<double>(r.samples[k].t) - static_cast<double>(resume)) / 1e6;
      break;
    }
  }
  // Its share since the return (cumulative), first at or above 60 - 2 %.
  double settle_ms = -1;
  for (size_t k = kb + 1; k < r.samples.size() && settle_ms < 0; ++k) {
    double cum = static_cast<double>(r.samples[k].busy[2] - r.samples[kb].busy[2]) /
                 static_cast<double>(r.samples[k].t - resume);
    if (cum >= 0.58) settle_ms = (static_cast<double>(r.samples[k].t) - static_cast<double>(resume)) / 1e6;
  }
  double w6_100ms = Share(r, 2, kb, At(r, resume + 100'000'000));
  if (f != nullptr) {
    for (size_t k = std::max<size_t>(kb, 1); k < r.samples.size(); ++k) {
      double rel = (static_cast<double>(r.samples[k].t) - static_cast<double>(resume)) / 1e6;
      if (rel > 300) break;
      std::fprintf(f, "%.1f,return,%.2f,%.2f,%.2f\n", rel, 100 * others(k), 100 * Engine(r, k - 1, k),
                   100 * Share(r, 2, k - 1, k));
    }
    std::fclose(f);
  }
  double w6_1s = Share(r, 2, kb, At(r, resume + 1'000'000'000));
  std::printf("  w6 stopped launching at %.3f s (queue drained %.1f ms later), returned at %.3f s\n",
              ts_stop, static_cast<double>(drained - stop) / 1e6, ts_back);
  std::printf("  after the stop: w1+w3 reach >= 95%% engine busy (per %.0f ms sample) %.0f ms after it"
              " (target <= 50) -> %s; engine busy over the first 50 ms %.1f%%, w1+w3 over the first"
              " second %.1f%%\n",
              g_opt.sample_ms, reach_ms, reach_ms >= 0 && reach_ms <= 50 ? "PASS" : "FAIL",
              100 * first50, 100 * others_1s);
  std::printf("  after the return: w6 has engine time within %.0f ms; its share since return reaches"
              " 60 - 2%% after %.0f ms (target <= 50) -> %s; its share over the first 100 ms %.1f%%,"
              " first second %.1f%%\n",
              first_ms, settle_ms, settle_ms >= 0 && settle_ms <= 50 ? "PASS" : "FAIL", 100 * w6_100ms,
              100 * w6_1s);
  Summary(scen, Fmt("phase windows max err %.2f pp (<=2: %s)", v.max_window_err, v.pass ? "PASS" : "FAIL"));
  Summary(scen, Fmt("others >=95%% busy %.0f ms after stop (<=50: %s); w6 runs %.0f ms after return, its"
                    " share since return >= 58%% after %.0f ms (<=50: %s), first 100 ms %.1f%%, first s %.1f%%",
                    reach_ms, reach_ms >= 0 && reach_ms <= 50 ? "PASS" : "FAIL", first_ms, settle_ms,
                    settle_ms >= 0 && settle_ms <= 50 ? "PASS" : "FAIL", 100 * w6_100ms, 100 * w6_1s));
}

// Scenario 7: high priority.
void PriorityScenario() {
  const std::string scen = "priority";
  TenantSpec lat;
  lat.name = "lat";
  lat.kind = "lat";
  TenantSpec lat_hp = lat;
  lat_hp.env = {"VGPU_PRIORITY=high"};
  TenantSpec lat_native = lat;
  lat_native.preload = false;
  TenantSpec trainer = Sat("trainer", {"VGPU_COMPUTE_WEIGHT=1"}, -1);
  std::printf("\n== %s: latency tenant (%llu us kernel, sync, %llu us gap), %.0f s per run after %.1f s"
              " warm-up (not counted) ==\n",
              scen.c_str(), static_cast<unsigned long long>(g_opt.lat_kernel_us),
              static_cast<unsigned long long>(g_opt.lat_gap_us), g_opt.seconds, g_opt.warmup);
  FILE* f = OpenCsv("share_" + scen + ".csv");
  if (f != nullptr) std::fprintf(f, "round,run,n,p50_us,p90_us,p99_us,max_us,warmup_max_us,trainer_share_pct\n");
  std::vector<double> p99_alone, p99_native, p99_mixed, p50_alone, p50_mixed, trainer_share;
  for (int round = 0; round < g_opt.rounds; ++round) {
    struct Run { const char* name; std::vector<TenantSpec> ts; };
    std::vector<Run> runs = {{"alone-no-libvgpu", {lat_native}},
                             {"alone-high", {lat_hp}},
                             {"high+trainer", {lat_hp, trainer}}};
    if (round % 2 == 1) std::reverse(runs.begin(), runs.end());
    for (auto& run : runs) {
      RunResult r = RunTenants(scen, run.ts, g_opt.warmup + g_opt.seconds);
      if (!r.ok) return;
      auto& m = r.results[0];
      size_t a = At(r, r.go + static_cast<uint64_t>(g_opt.warmup * 1e9));
      double tr = run.ts.size() > 1 ? 100 * Share(r, 1, a, r.samples.size() - 1) : 0;
      std::printf("  round %d %-17s n=%6.0f p50 %7.1f us  p90 %7.1f us  p99 %7.1f us  max %8.1f us"
                  " (warm-up max %.0f us)",
                  round, run.name, m["n"], m["p50_us"], m["p90_us"], m["p99_us"], m["max_us"],
                  m["warmup_max_us"]);
      if (run.ts.size() > 1) std::printf("  trainer share %.1f%%", tr);
      std::printf("\n");
      if (f != nullptr) {
        std::fprintf(f, "%d,%s,%.0f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f\n", round, run.name, m["n"], m["p50_us"],
                     m["p90_us"], m["p99_us"], m["max_us"], m["warmup_max_us"], tr);
      }
      std::string name = run.name;
      if (name == "alone-no-libvgpu") p99_native.push_back(m["p99_us"]);
      if (name == "alone-high") p99_alone.push_back(m["p99_us"]), p50_alone.push_back(m["p50_us"]);
      if (name == "high+trainer") {
        p99_mixed.push_back(m["p99_us"]);
        p50_mixed.push_back(m["p50_us"]);
        trainer_share.push_back(tr);
      }
    }
  }
  if (f != nullptr) std::fclose(f);
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
  };
  double ratio = mean(p99_mixed) / mean(p99_alone);
  double ratio_native = mean(p99_mixed) / mean(p99_native);
  std::printf("  p99 with trainer / alone (both high priority under libvgpu): %.3f (target <= 1.1) -> %s;"
              " / alone without libvgpu: %.3f; p50 ratio %.3f; trainer share %.1f%%\n",
              ratio, ratio <= 1.1 ? "PASS" : "FAIL", ratio_native, mean(p50_mixed) / mean(p50_alone),
              mean(trainer_share));
  Summary(scen, Fmt("p99 alone %.0f us (no libvgpu %.0f us), with trainer %.0f us: ratio %.3f (<=1.1: %s),"
                    " vs no libvgpu %.3f; trainer share %.1f%%",
                    mean(p99_alone), mean(p99_native), mean(p99_mixed), ratio,
                    ratio <= 1.1 ? "PASS" : "FAIL", ratio_native, mean(trainer_share)));
}

// Scenario 8: one saturating tenant governed (weight 1, alone) vs without libvgpu.
void OverheadScenario() {
  const std::string scen = "overhead";
  TenantSpec direct = Sat("direct", {}, -1);
  direct.preload = false;
  TenantSpec governed = Sat("governed", {"VGPU_COMPUTE_WEIGHT=1"}, -1);
  std::printf("\n== %s: one saturating tenant, without libvgpu vs governed (weight 1, alone),"
              " %.0f s each after %.1f s warm-up, order D G G D per round ==\n",
              scen.c_str(), g_opt.seconds, g_opt.warmup);
  FILE* f = OpenCsv("share_" + scen + ".csv");
  if (f != nullptr) std::fprintf(f, "round,run,engine_busy_pct,kernels_per_s\n");
  double sum[2] = {0, 0};
  int cnt[2] = {0, 0};
  for (int round = 0; round < g_opt.rounds; ++round) {
    for (int which : {0, 1, 1, 0}) {
      const TenantSpec& t = which == 0 ? direct : governed;
      RunResult r = RunTenants(scen, {t}, g_opt.warmup + g_opt.seconds);
      if (!r.ok) return;
      size_t a = At(r, r.go + static_cast<uint64_t>(g_opt.warmup * 1e9)), b = r.samples.size() - 1;
      double busy = 100 * Engine(r, a, b);
      double kps = static_cast<double>(r.samples[b].busy[0] - r.samples[a].busy[0]) /
                   (static_cast<double>(g_opt.kernel_us) * 1e3) /
                   (static_cast<double>(r.samples[b].t - r.samples[a].t) / 1e9);
      std::printf("  round %d %-9s engine busy %.3f%%  (~%.1f kernels/s)\n", round, t.name.c_str(), busy, kps);
      if (f != nullptr) std::fprintf(f, "%d,%s,%.4f,%.2f\n", round, t.name.c_str(), busy, kps);
      sum[which] += busy;
      ++cnt[which];
    }
  }
  if (f != nullptr) std::fclose(f);
  double d = sum[0] / cnt[0], g = sum[1] / cnt[1];
  double loss = 100 * (1 - g / d);
  std::printf("  engine busy: direct %.3f%%, governed %.3f%%: throughput loss %.2f%% (target <= 1) -> %s\n",
              d, g, loss, loss <= 1 ? "PASS" : "FAIL");
  Summary(scen, Fmt("engine busy direct %.3f%%, governed %.3f%%: loss %.2f%% (<=1: %s)", d, g, loss,
                    loss <= 1 ? "PASS" : "FAIL"));
}

const std::vector<std::string> kScenarios = {"caps-30-70", "weights-1-2", "weights-1-3-6",
                                             "weights-10-90", "caps-10-90", "cap-50",
                                             "conserve-1-3-6", "priority", "overhead"};

void RunScenario(const std::string& s) {
  if (s == "caps-30-70") {
    SteadyScenario(s, {Sat("c30", {"VGPU_COMPUTE_SHARE=30"}, 0.3), Sat("c70", {"VGPU_COMPUTE_SHARE=70"}, 0.7)}, 2, 1);
  } else if (s == "weights-1-2") {
    SteadyScenario(s, {Sat("w1", {"VGPU_COMPUTE_WEIGHT=1"}, 1.0 / 3), Sat("w2", {"VGPU_COMPUTE_WEIGHT=2"}, 2.0 / 3)}, 2, 1);
  } else if (s == "weights-1-3-6") {
    SteadyScenario(s, {Sat("w1", {"VGPU_COMPUTE_WEIGHT=1"}, 0.1), Sat("w3", {"VGPU_COMPUTE_WEIGHT=3"}, 0.3),
                       Sat("w6", {"VGPU_COMPUTE_WEIGHT=6"}, 0.6)}, 2, 1);
  } else if (s == "weights-10-90") {
    SteadyScenario(s, {Sat("w10", {"VGPU_COMPUTE_WEIGHT=10"}, 0.1), Sat("w90", {"VGPU_COMPUTE_WEIGHT=90"}, 0.9)}, 2, 1);
  } else if (s == "caps-10-90") {
    SteadyScenario(s, {Sat("c10", {"VGPU_COMPUTE_SHARE=10"}, 0.1), Sat("c90", {"VGPU_COMPUTE_SHARE=90"}, 0.9)}, 2, 1);
  } else if (s == "cap-50") {
    SteadyScenario(s, {Sat("c50", {"VGPU_COMPUTE_SHARE=50"}, 0.5)}, 2, 2);
  } else if (s == "conserve-1-3-6") {
    ConserveScenario();
  } else if (s == "priority") {
    PriorityScenario();
  } else if (s == "overhead") {
    OverheadScenario();
  }
}

void Usage() {
  std::printf(
      "usage: vgpu_bench_share [--scenario NAME|all] [--seconds S] [--warmup S] [--sample-ms MS]\n"
      "         [--kernel-us US] [--lat-kernel-us US] [--lat-gap-us US] [--rounds N] [--out DIR]\n"
      "         [--libvgpu PATH] [--sim-dir DIR] [--verbose]\n"
      "scenarios:");
  for (const auto& s : kScenarios) std::printf(" %s", s.c_str());
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--tenant") == 0) {
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
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--scenario") g_opt.scenario = val();
    else if (k == "--seconds") g_opt.seconds = std::atof(val());
    else if (k == "--warmup") g_opt.warmup = std::atof(val());
    else if (k == "--sample-ms") g_opt.sample_ms = std::atof(val());
    else if (k == "--kernel-us") g_opt.kernel_us = std::strtoull(val(), nullptr, 10);
    else if (k == "--lat-kernel-us") g_opt.lat_kernel_us = std::strtoull(val(), nullptr, 10);
    else if (k == "--lat-gap-us") g_opt.lat_gap_us = std::strtoull(val(), nullptr, 10);
    else if (k == "--rounds") g_opt.rounds = std::max(1, std::atoi(val()));
    else if (k == "--out") g_opt.out_dir = val();
    else if (k == "--libvgpu") g_opt.libvgpu = val();
    else if (k == "--sim-dir") g_opt.sim_dir = val();
    else if (k == "--verbose") g_opt.verbose = true;
    else {
      Usage();
      return k == "--help" || k == "-h" ? 0 : 2;
    }
  }
  if (g_opt.sample_ms <= 0 || g_opt.seconds <= 0 || g_opt.kernel_us == 0) {
    Usage();
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  g_self.assign(self, static_cast<size_t>(n));
  std::vector<std::string> todo;
  if (g_opt.scenario == "all") {
    todo = kScenarios;
  } else {
    std::stringstream ss(g_opt.scenario);
    for (std::string s; std::getline(ss, s, ',');) {
      if (std::find(kScenarios.begin(), kScenarios.end(), s) == kScenarios.end()) {
        std::fprintf(stderr, "unknown scenario '%s'\n", s.c_str());
        Usage();
        return 2;
      }
      todo.push_back(s);
    }
  }
  std::printf("vgpu_bench_share: libvgpu %s, sim %s, sampling every %.0f ms\n", g_opt.libvgpu.c_str(),
              g_opt.sim_dir.c_str(), g_opt.sample_ms);
  for (const auto& s : todo) {
    RunScenario(s);
    std::fflush(stdout);
  }
  std::printf("\n== summary ==\n");
  for (const auto& [s, line] : g_summary) std::printf("  %-15s %s\n", s.c_str(), line.c_str());
  return g_harness_error ? 1 : 0;
}
