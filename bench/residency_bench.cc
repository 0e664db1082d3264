// vgpu_bench_residency: checkpoint / restore throughput and suspend-to-free
// latency of a live process, against plain memcpy and disk write bandwidth
// measured in the same run (docs/performance.md, "Checkpoint and residency").
//
// Starts vgpu_residency_client under LD_PRELOAD=libvgpu.so (VGPU_VMM=on) on a
// fresh simulated node with a buffer of --mib MiB of incompressible data, then
// drives its agent with the control client exactly as vgpuctl does:
//   suspend + resume            (device <-> host RAM; --skip-suspend leaves it
//                                out: it needs a second copy in host RAM)
//   checkpoint, leave running   (device -> image on --dir)
//   checkpoint + restore        (released; image -> device)
// Suspend-to-free latency is split into the phases the agent reports (drain,
// copy out, unmap + release); "beyond copy" is the request's wall time minus
// the copy. The memcpy reference copies a 256 MiB buffer repeatedly (memory
// bandwidth does not depend on the size past the caches, and two buffers of
// the full size would not fit next to the device memory of a large run).
// The copy references are the node's own bulk bandwidth between device memory
// and page-locked host memory (cuMemHostAlloc, cuMemcpyDtoH / cuMemcpyHtoD of
// 256 MiB), measured by `vgpu_residency_client bandwidth` on the same node
// without libvgpu before the job starts; suspend is reported against the
// device-to-host figure and resume against the host-to-device one, and also
// against the same copy into freshly created and mapped device memory (what a
// resume copies into; on the simulator its host pages are faulted in by the
// copy, a cost a GPU does not have).
// Usage: vgpu_bench_residency [--mib N] [--dir DIR] [--rounds R] [--skip-suspend]
//                             [--driver-dir DIR]  (a real driver's libcuda.so.1 directory)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "ctl/control/client.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "vgpu_bench_residency: %s\n", m.c_str());
  std::exit(1);
}

struct Reply {
  double seconds = 0;      // wall time of the whole request
  nlohmann::json result;   // the agent's result
};

Reply Call(pid_t pid, const std::string& cmd, nlohmann::json args, const std::string& run_dir) {
  vgpu::ctl::Request req;
  req.cmd = cmd;
  req.args = std::move(args);
  vgpu::ctl::Response resp;
  vgpu::ctl::ClientOptions o;
  o.run_dir = run_dir;
  o.timeout_ms = 600000;
  double t0 = Now();
  vgpu::ctl::Status s = vgpu::ctl::Call(pid, req, nullptr, &resp, o);
  double t = Now() - t0;
  if (!s.ok()) Die(cmd + ": " + s.message);
  if (!resp.ok) Die(cmd + ": " + resp.error);
  return {t, resp.result};
}

double Phase(const Reply& r, const char* name) {
  const auto& p = r.result.find("phases");
  if (p == r.result.end() || !p->contains(name)) return 0;
  return (*p)[name].get<double>();
}

double MemcpyGBs(size_t bytes) {
  const size_t n = std::min<size_t>(bytes, 256u << 20);
  const size_t reps = std::max<size_t>(4, bytes / n);
  std::unique_ptr<char[]> a(new char[n]), b(new char[n]);
  std::memset(a.get(), 1, n);
  std::memset(b.get(), 2, n);
  std::memcpy(b.get(), a.get(), n);  // warm: both buffers faulted in
  asm volatile("" : : "r"(b.get()) : "memory");
  double t0 = Now();
  for (size_t i = 0; i < reps; ++i) {
    a[i % n] = static_cast<char>(i);
    std::memcpy(b.get(), a.get(), n);
    asm volatile("" : : "r"(b.get()) : "memory");
  }
  double t = Now() - t0;
  return static_cast<double>(n * reps) / t / 1e9;
}

struct Disk {
  double write_gbs = 0;  // write + fsync, best of two passes
  double read_gbs = 0;   // the same file read back
  bool direct = false;   // O_DIRECT: the disk itself, not the page cache's write-back policy
};

// The disk's bandwidth with O_DIRECT where the file system has it (a
// buffered write + one final fsync measured anywhere between 0.2 and 1.4 GB/s
// on the development VM's disk, whose O_DIRECT bandwidth is ~1 GB/s), else
// buffered (tmpfs).
Disk DiskProbe(const std::string& dir, size_t bytes) {
  std::string path = dir + "/disk-probe.bin";
  const size_t chunk = 8u << 20;
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, chunk) != 0) Die("out of memory");
  std::unique_ptr<uint64_t, decltype(&free)> buf(static_cast<uint64_t*>(mem), &free);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < chunk / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf.get()[i] = x;
  }
  Disk d;
  auto open_file = [&](int flags) {
    int fd = open(path.c_str(), flags | O_DIRECT, 0600);
    d.direct = fd >= 0;
    return fd >= 0 ? fd : open(path.c_str(), flags, 0600);
  };
  for (int pass = 0; pass < 2; ++pass) {
    int fd = open_file(O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0) Die("cannot write " + path);
    double t0 = Now();
    for (size_t done = 0; done < bytes; done += chunk) {
      buf.get()[0] = done + pass;  // no two chunks alike
      if (write(fd, buf.get(), chunk) != static_cast<ssize_t>(chunk)) Die("write failed");
    }
    fsync(fd);
    d.write_gbs = std::max(d.write_gbs, bytes / (Now() - t0) / 1e9);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  int fd = open_file(O_RDONLY);
  double t0 = Now();
  size_t got = 0;
  for (ssize_t n; (n = read(fd, buf.get(), chunk)) > 0;) got += static_cast<size_t>(n);
  d.read_gbs = got / (Now() - t0) / 1e9;
  close(fd);
  unlink(path.c_str());
  return d;
}

// Where the client's libcuda.so.1 comes from: the simulator's, or a real
// driver's directory (--driver-dir) on a GPU machine.
std::string g_driver_dir = VGPU_BENCH_SIM_DIR;

// Starts vgpu_residency_client with `args` on simulated node `node`, stdout
// to `out`; under libvgpu (VMM on) when `preload`.
pid_t StartClient(const std::string& node, const std::string& devs, const std::string& run_dir,
                  const std::string& out, bool preload, const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 1);
  // The caller's libvgpu settings must not change what is measured.
  std::vector<std::string> scrub;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string name(*e, strcspn(*e, "="));
    if (vgpu::IsConfigVariable(name) ||
        (name.rfind("VGPU_", 0) == 0 && name.rfind("VGPU_SIM_", 0) != 0)) {
      scrub.push_back(name);
    }
  }
  for (const auto& n : scrub) unsetenv(n.c_str());
  unsetenv("LD_PRELOAD");
  setenv("VGPU_SIM_NODE", node.c_str(), 1);
  setenv("VGPU_SIM_DEVICES", devs.c_str(), 1);
  setenv("LD_LIBRARY_PATH", g_driver_dir.c_str(), 1);
  if (preload) {
    setenv("VGPU_VMM", "on", 1);
    setenv("VGPU_RUN_DIR", run_dir.c_str(), 1);
    setenv("LD_PRELOAD", VGPU_BENCH_LIBVGPU, 1);
  }
  std::vector<char*> argv{const_cast<char*>(VGPU_BENCH_CLIENT)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(VGPU_BENCH_CLIENT, argv.data());
  _exit(127);
}

struct Pinned {
  double d2h = 0, h2d = 0;  // GB/s
  double h2d_fresh = 0;     // into device memory created and mapped just before
};

Pinned ReadPinned(const std::string& path) {
  Pinned p;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    const int got = std::sscanf(line.c_str(), "d2h=%lf h2d=%lf h2d_fresh=%lf", &p.d2h, &p.h2d,
                                &p.h2d_fresh);
    if (got == 3) break;
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int rounds = 3;
  bool skip_suspend = false;
  std::string dir = "/tmp/vgpu-bench-residency";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--skip-suspend") skip_suspend = true;
    else if (a == "--driver-dir" && i + 1 < argc) g_driver_dir = argv[++i];
    else Die("usage: vgpu_bench_residency [--mib N] [--dir DIR] [--rounds R] [--skip-suspend]"
             " [--driver-dir DIR]");
  }
  std::filesystem::create_directories(dir);
  std::string run_dir = dir + "/run";
  std::filesystem::create_directories(run_dir);
  std::string stop = dir + "/stop", out = dir + "/client.out";
  unlink(stop.c_str());
  size_t bytes = mib << 20;
  const std::string node = "vgpu-bench-residency-" + std::to_string(getpid());
  const std::string devs = "1x" + std::to_string(mib / 1024 + 2) + "GiB";
  const std::string m = std::to_string(mib);
  const std::string ref_out = dir + "/bandwidth.out";
  pid_t ref = StartClient(node, devs, run_dir, ref_out, false, {"bandwidth", m});
  int ref_st = 0;
  waitpid(ref, &ref_st, 0);
  Pinned pinned = ReadPinned(ref_out);
  if (!WIFEXITED(ref_st) || WEXITSTATUS(ref_st) != 0 || pinned.d2h <= 0) {
    Die("the pinned bandwidth reference failed (" + ref_out + ")");
  }
  pid_t pid = StartClient(node, devs, run_dir, out, true, {"hold", "1", stop, m});
  std::string sock = run_dir + "/agent-" + std::to_string(pid) + ".sock";
  for (int i = 0;; ++i) {
    std::ifstream f(out);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (s.find("ready") != std::string::npos && access(sock.c_str(), F_OK) == 0) break;
    if (i > 60000) Die("client did not start");
    usleep(1000);
  }
  Disk probe = DiskProbe(dir, bytes);
  double mem = MemcpyGBs(bytes), disk = probe.write_gbs;
  Reply best_susp{1e9, {}};
  double best_res = 1e9, best_ck = 1e9, best_ckrel = 1e9, best_rst = 1e9;
  for (int r = 0; r < rounds; ++r) {
    if (!skip_suspend) {
      Reply s = Call(pid, "suspend", nlohmann::json::object(), run_dir);
      if (s.seconds < best_susp.seconds) best_susp = s;
      best_res = std::min(best_res, Call(pid, "resume", nlohmann::json::object(), run_dir).seconds);
    }
    auto checkpoint = [&](bool leave_running) {
      // One image at a time: on a RAM file system (--dir /dev/shm/...) the
      // old image, the new one's temp file and the simulated device memory
      // would otherwise need three times the buffer size in host RAM.
      std::filesystem::remove_all(dir + "/ckpt");
      nlohmann::json args = {{"dir", dir + "/ckpt"}, {"leave_running", leave_running}};
      return Call(pid, "checkpoint", args, run_dir).seconds;
    };
    best_ck = std::min(best_ck, checkpoint(true));
    best_ckrel = std::min(best_ckrel, checkpoint(false));
    best_rst = std::min(best_rst, Call(pid, "restore", {{"from", dir + "/ckpt"}}, run_dir).seconds);
  }
  int fd = open(stop.c_str(), O_WRONLY | O_CREAT, 0600);
  close(fd);
  int st = 0;
  waitpid(pid, &st, 0);
  std::filesystem::remove_all(dir + "/ckpt");
  shm_unlink(("/vgpu-sim-" + node).c_str());
  double gb = bytes / 1e9, slower = std::min(mem, disk);
  auto row = [&](const char* what, double secs) {
    std::printf("%-40s %9.3f %10.2f %8.0f%%\n", what, secs, gb / secs, 100.0 * gb / secs / slower);
  };
  std::printf("device memory: %zu MiB (incompressible), best of %d rounds\n", mib, rounds);
  std::printf("%-40s %9s %10s %9s\n", "operation", "seconds", "GB/s", "of slower");
  std::printf("%-40s %9s %10.2f\n", "host memcpy (reference)", "", mem);
  std::printf("%-40s %9s %10.2f\n", "D2H into pinned memory (reference)", "", pinned.d2h);
  std::printf("%-40s %9s %10.2f\n", "H2D from pinned memory (reference)", "", pinned.h2d);
  std::printf("%-40s %9s %10.2f\n", "H2D into fresh device memory (ref.)", "", pinned.h2d_fresh);
  std::printf("%-40s %9s %10.2f\n",
              probe.direct ? "disk write O_DIRECT + fsync (reference)"
                           : "disk write + fsync (reference)",
              "", disk);
  std::printf("%-40s %9s %10.2f\n",
              probe.direct ? "disk read O_DIRECT" : "disk read, cache dropped", "", probe.read_gbs);
  if (!skip_suspend) {
    row("suspend (drain, copy out, release)", best_susp.seconds);
    row("resume (map + copy in)", best_res);
  }
  row("checkpoint --leave-running", best_ck);
  row("checkpoint (then released)", best_ckrel);
  row("restore (verify + decompress + copy)", best_rst);
  std::printf("restore vs min(memcpy, disk read): %.0f%%\n",
              100.0 * gb / best_rst / std::min(mem, probe.read_gbs));
  if (!skip_suspend) {
    double drain = Phase(best_susp, "drain"), copy = Phase(best_susp, "copy_out");
    double release = Phase(best_susp, "release");
    std::printf("suspend vs pinned D2H: %.0f%% (whole request; its copy phase alone: %.0f%%)\n",
                100.0 * gb / best_susp.seconds / pinned.d2h,
                copy > 0 ? 100.0 * gb / copy / pinned.d2h : 0.0);
    std::printf("resume vs pinned H2D: %.0f%% (whole request: map + copy in); vs H2D into fresh "
                "device memory: %.0f%%\n",
                100.0 * gb / best_res / pinned.h2d, 100.0 * gb / best_res / pinned.h2d_fresh);
    std::printf(
        "suspend phases (agent): drain %.1f ms, copy out %.1f ms, unmap + release %.1f ms\n",
        drain * 1e3, copy * 1e3, release * 1e3);
    std::printf("suspend-to-free latency beyond copy: %.1f ms (request wall time minus copy out; "
                "in the agent: %.1f ms)\n",
                (best_susp.seconds - copy) * 1e3, (drain + release) * 1e3);
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
