// The simulated node: one POSIX shared-memory region per VGPU_SIM_NODE name,
// shared by every process (libcuda and libnvidia-ml alike) of that node. It holds
// device capacity and usage, per-process usage, and each device's execution
// engine. Layout rules: fixed-size, no pointers, every field a process may race
// on is atomic or under the robust engine mutex, so a process killed at any
// instruction leaves a region others can keep using.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "sim/node/sim_config.h"

namespace vgpu::sim {

inline constexpr uint64_t kNodeMagic = 0x314d495355504756ull;  // "VGPUSIM1"
inline constexpr uint32_t kNodeVersion = 8;  // 8: the process slot's pid namespace
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxProcesses = 1024;  // as many as the scheduler has clients
inline constexpr int kUtilSamples = 64;
inline constexpr int kProcUtilSamples = 16;

struct UtilSample {
  struct Value {
    uint64_t wall_ns, busy_ns;
  };
  std::atomic<uint64_t> wall_ns;
  std::atomic<uint64_t> busy_ns;
};

struct DeviceState {
  uint64_t total_bytes;
  uint64_t mem_bandwidth_bytes_per_s;
  uint64_t checkpoint_bytes_per_s;  // cuCheckpointProcessCheckpoint's copy rate
  uint64_t restore_bytes_per_s;     // cuCheckpointProcessRestore's
  int32_t cc_major, cc_minor, sm_count, pci_bus;
  uint8_t uuid[16];
  char name[96];
  std::atomic<uint64_t> used_bytes;
  pthread_mutex_t engine;                  // robust, process-shared; held while a kernel runs
  std::atomic<uint64_t> busy_ns;           // total engine busy time of finished kernels
  std::atomic<uint64_t> running_since_ns;  // start of the kernel on the engine, 0 when idle
  std::atomic<int32_t> running_pid;        // whose kernel that is (0: idle or unknown)
  std::atomic<uint64_t> kernels_run;
  std::atomic<uint64_t> last_release_ns;  // modelled end of the last kernel
  std::atomic<uint32_t> util_next;        // ring of (wall, busy) samples for NVML utilization
  UtilSample util[kUtilSamples];
};

// The driver checkpoint API (cuCheckpointProcess*) between processes: a caller
// claims `owner`, writes the request, bumps `request` (a futex word) and waits
// for `done` to reach it; the process's restore thread executes it. `state` is
// the CUprocessState that cuCheckpointProcessGetState reads.
struct CheckpointChannel {
  std::atomic<uint32_t> state;        // CUprocessState
  std::atomic<int32_t> restore_tid;   // the restore thread, 0 before it runs
  std::atomic<int32_t> owner;         // pid of the caller whose request is in flight, 0: none
  std::atomic<uint32_t> request;      // sequence number of the latest request
  std::atomic<uint32_t> done;         // sequence number of the latest finished one
  std::atomic<int32_t> result;        // its CUresult
  uint32_t op;                        // CheckpointOp of the request
  uint32_t timeout_ms;                // lock: 0 waits for ever
  uint32_t pair_count;                // restore: GPU pairs (0: back onto the same GPUs)
  uint8_t pairs[kMaxDevices][2][16];  // restore: old UUID, new UUID
};

struct ProcessSlot {
  std::atomic<int32_t> pid;          // 0: free
  std::atomic<uint64_t> start_time;  // /proc/<pid>/stat field 22, guards against pid reuse
  std::atomic<uint64_t> used_bytes[kMaxDevices];
  std::atomic<uint32_t> context_mask;  // bit d: the process has a context on device d
  // Engine time this process's kernels used on each device: the simulated
  // GPU's own per-process accounting (ground truth for compute-share tests).
  std::atomic<uint64_t> busy_ns[kMaxDevices];
  std::atomic<uint64_t> image_id;  // ProcessImageId(): a pre-exec image's slot is freed
  // Inode of the process's pid namespace: a container sharing the node (its
  // IPC namespace) has pids that mean nothing elsewhere, so only processes of
  // the same namespace judge whether `pid` is alive (PidNamespaceId()).
  std::atomic<uint64_t> pid_ns;
  // Per-process utilization history (nvmlDeviceGetProcessUtilization): the
  // modelled end of its last kernel on each device, and per device a ring of
  // (kernel start, busy_ns before that kernel) samples at least 100 ms apart,
  // so the busy time over a recent window can be read back.
  std::atomic<uint64_t> last_end_ns[kMaxDevices];
  std::atomic<uint32_t> util_next[kMaxDevices];
  UtilSample util[kMaxDevices][kProcUtilSamples];
  CheckpointChannel checkpoint;
};

// One process's engine time on a device over a window ending now.
struct ProcessBusy {
  int32_t pid;
  uint64_t busy_ns;         // engine time of its kernels in the window
  uint64_t window_ns;       // the window's length
  uint64_t last_active_ns;  // end of its last kernel (now while one runs)
};

struct NodeHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t region_bytes;
  std::atomic<uint32_t> ready;  // 0 while the creator initializes
  uint32_t device_count;
  char devices_spec[256];
  uint64_t created_ns;
  DeviceState devices[kMaxDevices];
  ProcessSlot processes[kMaxProcesses];
};

// Monotonic clock in ns; the sim's device clock too.
uint64_t NowNs();

class NodeRegion {
 public:
  // Opens (creating if needed) the node region named in config. On a layout or
  // configuration mismatch returns nullptr with a clear message in *error.
  static NodeRegion* Open(const SimConfig& config, std::string* error);
  // Opens an existing node read-mostly (NVML); nullptr if none exists yet.
  static NodeRegion* Attach(const std::string& node_name, std::string* error);

  NodeHeader* header() const { return header_; }
  int device_count() const { return static_cast<int>(header_->device_count); }
  // The node's device behind this process's ordinal d. Identity until a
  // checkpoint restore remaps the process onto other GPUs (gpuPairs): the
  // process keeps its ordinals, they then name the new devices.
  int Phys(int d) const { return phys_[d].load(std::memory_order_relaxed); }
  void Remap(const int* phys) {
    for (int d = 0; d < kMaxDevices; ++d) phys_[d].store(phys[d], std::memory_order_relaxed);
  }
  DeviceState& device(int d) const { return header_->devices[Phys(d)]; }
  DeviceState& physical(int p) const { return header_->devices[p]; }

  // This process's slot (registered by Open); nullptr for Attach.
  ProcessSlot* self() const { return self_.load(std::memory_order_acquire); }

  // Capacity: reserve bytes on device d for this process, compare-and-swap on
  // the device counter. On shortage reaps dead processes once and retries.
  bool Reserve(int d, uint64_t bytes);
  void Unreserve(int d, uint64_t bytes);
  // The same on node device p, whatever ordinal names it.
  bool ReservePhysical(int p, uint64_t bytes);
  void UnreservePhysical(int p, uint64_t bytes);

  // Engine: held by a stream worker for the duration of one kernel.
  // Takes the engine for a kernel that could have started at ready_ns; returns
  // its start: not before the previous kernel's end, not after now.
  uint64_t EngineAcquire(int d, uint64_t ready_ns);
  // Ends the kernel that started at started_ns at its modelled end end_ns
  // (>= started_ns), which is what the engine records, whenever the host
  // thread gets here: a late wake-up is not device time, and the next kernel
  // starts at end_ns. The caller releases no earlier than end_ns, so that no
  // one sees the kernel done before the device would be. Returns end_ns.
  uint64_t EngineRelease(int d, uint64_t started_ns, uint64_t end_ns);

  // Busy fraction of device d over roughly the last window_ns (0..1).
  double Utilization(int d, uint64_t window_ns) const;

  // The processes active on device d after since_ns (0: as far back as the
  // history goes), one entry per pid, with their engine time over a window
  // from since_ns (or the nearest history sample before it) to now. Returns
  // the count written to out (at most max).
  int ProcessUtilization(int d, uint64_t since_ns, uint64_t now, ProcessBusy* out, int max) const;

  // Frees usage of processes that died without cleaning up. Returns bytes freed.
  uint64_t ReapDead();

  // Removes this process's slot (at exit) and its usage.
  void Unregister();

  // The pid of slot's process in the caller's pid namespace, as a real
  // driver's callers name processes (host pids from the host, whatever
  // container the process is in); 0 if not known. Each registered process
  // holds a POSIX record lock on its slot's byte past the region, and the
  // kernel reports a lock's owner translated into the asker's namespace.
  pid_t PidHere(const ProcessSlot& slot) const;

  // shm object name for a node name ("/vgpu-sim-<name>").
  static std::string ShmName(const std::string& node_name);

 private:
  NodeRegion();
  NodeHeader* header_ = nullptr;
  std::atomic<int> phys_[kMaxDevices];
  // Atomic: Unregister (at exit) clears it while other threads of the
  // process may still free memory.
  std::atomic<ProcessSlot*> self_{nullptr};
  bool registered_once_ = false;  // opened with a slot (Open), not Attach
  int fd_ = -1;                   // the node file, held open (and flock()ed) for life
};

}  // namespace vgpu::sim
