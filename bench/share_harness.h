// Harness of vgpu_bench_share (share_bench.cc): runs tenant processes on a
// fresh simulated node, samples their engine time and scores their shares.
//
// The binary has two roles, both implemented here:
//   - the orchestrator side (Harness::RunTenants): for each run it starts
//     tenant processes (this binary again, with --tenant) on a fresh simulated
//     node (VGPU_SIM_NODE) and a fresh scheduler region (VGPU_SCHED_REGION),
//     each under LD_PRELOAD=libvgpu.so with its own VGPU_* settings, releases
//     them at once and samples every tenant's engine time; it removes the node
//     and scheduler regions afterwards. ScoreWindows and WriteSeries turn the
//     samples into shares and CSV files;
//   - a tenant (--tenant sat|lat|probe, RunTenantRole): a saturating launcher
//     (back-to-back vgpu_sim_sleep kernels on one stream; optionally idle for
//     a while and return), a latency-sensitive one (a short kernel,
//     synchronize, record launch→sync latency, sleep a gap, repeat) or a
//     launch-cost probe (bursts of 32 empty kernels, each cuLaunchKernel call
//     timed, then synchronize and sleep a gap).
//
// Ground truth is the simulated GPU's own accounting, not libvgpu's: the node
// region's ProcessSlot::busy_ns[0] (engine time of each process's finished
// kernels) and DeviceState busy_ns + running_since_ns (engine busy, exact to
// the sample instant). The orchestrator attaches read-only and samples every
// --sample-ms (default 10 ms); shares are Δbusy / Δwall per window. The first
// --warmup seconds (default 1) after the tenants are released are not scored.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#ifndef VGPU_BENCH_LIBVGPU
#define VGPU_BENCH_LIBVGPU "libvgpu.so"
#endif
#ifndef VGPU_BENCH_SIM_LIB_DIR
#define VGPU_BENCH_SIM_LIB_DIR ""
#endif

namespace vgpu::bench {

// The command line of the orchestrator (share_bench.cc parses it).
struct Options {
  std::string scenario = "all";
  double seconds = 10;
  double warmup = 1;
  double sample_ms = 10;
  uint64_t kernel_us = 1000;
  uint64_t lat_kernel_us = 200;
  uint64_t lat_gap_us = 3000;
  int rounds = 1;
  std::string scale_tenants = "1,8,64,256";  // scenario "scale"
  std::string out_dir = ".";
  std::string libvgpu = VGPU_BENCH_LIBVGPU;
  std::string sim_dir = VGPU_BENCH_SIM_LIB_DIR;
  bool verbose = false;
};

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
  uint64_t kernels;             // kernels the device finished
  uint64_t lease_changes;       // the scheduler's lease generation on device 0
  std::vector<uint64_t> busy;   // per tenant, finished kernels
};

struct RunResult {
  bool ok = false;
  uint64_t go = 0;
  std::vector<Sample> samples;
  std::vector<std::map<std::string, double>> results;  // per tenant, from its "result" line
};

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

// The tenant role: argv is "<self> --tenant sat|lat [--flag value]...", as
// Harness::RunTenants writes it. Returns the process's exit status.
int RunTenantRole(int argc, char** argv);

// Index of the first sample at or after time t (ns).
size_t At(const RunResult& r, uint64_t t);
// Tenant's engine time over samples [a, b] as a fraction of wall time.
double Share(const RunResult& r, size_t tenant, size_t a, size_t b);
// Device busy over samples [a, b] as a fraction of wall time.
double Engine(const RunResult& r, size_t a, size_t b);

class Harness {
 public:
  // `self`: this binary, re-executed as the tenants.
  Harness(const Options& opt, std::string self);

  const Options& options() const { return opt_; }
  // True once any harness error was reported (the exit status is then 1).
  bool error() const { return error_; }
  // Prints "share_bench: <tag>: <why>" and marks the run as a harness error.
  void ReportError(const std::string& tag, const std::string& why);

  // Runs one set of tenants for `run_s` seconds after release and samples them.
  RunResult RunTenants(const std::string& tag, const std::vector<TenantSpec>& tenants,
                       double run_s);

  // Opens <out_dir>/<name> for writing and prints its path; null (with a
  // message) when it cannot be written.
  FILE* OpenCsv(const std::string& name) const;

  // Series at 100 ms resolution (for plots): share of each tenant in each
  // 100 ms interval, the same averaged over a centred 500 ms window, and the
  // engine busy fraction.
  void WriteSeries(const std::string& scen, const std::vector<TenantSpec>& ts,
                   const RunResult& r) const;

  // Scores 1 s windows from warm-up to the end against each tenant's target
  // (targets(window start, tenant) < 0: window not scored for that tenant).
  ShareVerdict ScoreWindows(const std::string& scen, const std::vector<TenantSpec>& ts,
                            const RunResult& r, double window_tol, double run_tol,
                            const std::function<double(double, double, size_t)>& target) const;

 private:
  Options opt_;
  std::string self_;
  int run_counter_ = 0;
  bool error_ = false;
};

}  // namespace vgpu::bench
