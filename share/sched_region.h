// Compute-share scheduling state of a node, in POSIX shared memory
// ("/vgpu-sched" by default, mode 0666), shared by every interposed process
// of the node: every uid, and every container (the CDI spec mounts the file).
//
// Model (docs/compute-share.md): per physical device, one process at a time
// holds the device's *lease* and only the holder may have work queued on the
// device. Exclusivity is what makes the holder's measured busy time its true
// GPU time: without it, a kernel's elapsed time would include waiting behind
// other tenants' kernels. Each (device, group) has a token bucket in GPU
// nanoseconds, charged with the holder's measured busy time; a fixed cap
// refills at its share of wall time, weighted buckets are credited by weight
// from the time weighted groups use. Buckets decide who gets the lease next and when
// the holder must yield. All fields are atomics; no lock is ever held, so a
// process killed at any instruction leaves state that others repair (a dead
// holder's lease is taken over).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>

#include "common/container_paths.h"
#include "common/status.h"

namespace vgpu {

inline constexpr uint64_t kSchedMagic = 0x3144484353555047ull;  // "GPUSCHD1"
// Version 3: 256 groups per device, 1,024 clients, scan high-water marks.
// Version 4: one region per node (any uid, any container); a client is alive
// while it holds the lock on its byte of the region file, not by pid.
inline constexpr uint32_t kSchedVersion = 4;
inline constexpr int kSchedDevices = 16;
// Groups (tenants) per device and client processes per node. A process whose
// compute policy needs a slot that is not there fails its cuInit (fail
// closed, docs/compute-share.md). Scans stop at high-water marks, so the cost
// follows the slots in use, not these capacities.
inline constexpr int kSchedGroups = 256;
inline constexpr int kSchedClients = 1024;

// A set of group slots of one device, one bit per slot.
using GroupSet = std::bitset<kSchedGroups>;

enum class SchedPolicy : uint32_t { kNative = 0, kFixed = 1, kWeighted = 2 };

// Scheduling constants (documented in docs/compute-share.md).
struct SchedTuning {
  uint64_t min_slice_ns = 10'000'000;           // a holder keeps the lease at least this long
  uint64_t max_slice_ns = 50'000'000;           // ... and at most this long when others wait
  uint64_t hysteresis_ns = 10'000'000;          // a waiter must be this far ahead in tokens
  uint64_t active_window_ns = 20'000'000;       // a group counts as active this long after demand
  uint64_t high_priority_idle_ns = 20'000'000;  // others resume this long after high prio idles
  uint64_t burst_ns = 50'000'000;        // at most this much GPU time banked (times the rate)
  int64_t debt_floor_ns = -100'000'000;  // debt never grows beyond this
  // A group slot no live process is in is freed (when a new group finds the
  // table full) once nobody joined or used it for this long: a tenant that
  // restarts at once finds its bucket, debt included.
  uint64_t group_reclaim_idle_ns = 1'000'000'000;
  // At most one refill pass per device this often (waiters and holders all
  // refill; a late pass adds the whole interval, so nothing is lost).
  uint64_t refill_interval_ns = 500'000;
};

// A group slot's key: 0 (free), the group name's hash (GroupKey, 40 bits),
// or, while a process reclaims the slot, the hash with the mark bit and the
// reclaim pass's tag above it.
inline constexpr int kGroupHashBits = 40;
inline constexpr uint64_t kGroupHashMask = (1ull << kGroupHashBits) - 1;
inline constexpr uint64_t kGroupReclaimTagMask = (1ull << (63 - kGroupHashBits)) - 1;
inline constexpr uint64_t kGroupReclaimMark = 1ull << 63;

struct SchedGroup {
  std::atomic<uint64_t> key;  // 0: free; see kGroupHashBits
  char name[64];
  std::atomic<uint32_t> policy;          // SchedPolicy
  std::atomic<uint32_t> share_permille;  // fixed: the cap; weighted: ignored
  std::atomic<uint32_t> weight;          // weighted
  std::atomic<uint32_t> high_priority;
  std::atomic<int64_t> tokens_ns;
  std::atomic<uint64_t> last_demand_ns;  // last time a member wanted or used the device
  std::atomic<uint64_t> used_ns;         // total charged (statistics)
  std::atomic<uint64_t> joined_ns;       // last time a process claimed or joined it
};

struct SchedClient {
  // 0: free; -pid while claimed. The pid in the client's own pid namespace:
  // it names the process for people (with pid_ns), never decides liveness.
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> pid_ns;               // inode of its pid namespace (PidNamespaceId)
  std::atomic<int32_t> group[kSchedDevices];  // group index per device, -1: none
  std::atomic<uint64_t> demand_since_ns[kSchedDevices];  // 0: not waiting
  // Futex word of this client's waiting threads: bumped when the lease is
  // handed to it, or freed while it waits (a hand-over wakes one process,
  // not every waiter of the device).
  std::atomic<uint32_t> turn;
};

struct SchedDevice {
  std::atomic<int32_t> holder;  // client index, -1: nobody
  std::atomic<uint64_t> lease_since_ns;
  std::atomic<uint32_t> gen;  // bumped at every lease change (statistics)
  std::atomic<uint64_t> last_refill_ns;
  std::atomic<uint32_t> reclaim_seq;  // tags of group reclaim passes
  std::atomic<uint32_t> groups_hwm;   // slots at and above it were never claimed
  SchedGroup groups[kSchedGroups];
};

struct SchedLayout {
  uint64_t magic;
  uint32_t version;
  uint32_t region_bytes;
  std::atomic<uint32_t> ready;
  std::atomic<uint32_t> clients_hwm;   // slots at and above it were never claimed
  std::atomic<uint64_t> last_reap_ns;  // ReapDeadIfDue
  SchedDevice devices[kSchedDevices];
  SchedClient clients[kSchedClients];
};

struct GroupParams {
  SchedPolicy policy = SchedPolicy::kNative;
  uint32_t share_permille = 1000;
  uint32_t weight = 1;
  bool high_priority = false;
};

class SchedRegion {
 public:
  // Opens or creates the region (mode 0666, node-wide: a region of another
  // mode or layout is refused, EIO with a one-line message). `name` ""
  // means kNodeSchedRegion.
  static Result<std::unique_ptr<SchedRegion>> Open(const std::string& name);
  // An anonymous region for unit tests.
  static std::unique_ptr<SchedRegion> CreatePrivate();
  ~SchedRegion();

  SchedDevice& device(int d) const { return layout_->devices[d]; }
  SchedClient& client(int c) const { return layout_->clients[c]; }
  const SchedTuning& tuning() const { return tuning_; }

  // A client slot for this process; kBusy if the table is full, kIo with a
  // one-line reason if its liveness lock cannot be taken. The slot is locked
  // through a descriptor of this process's own (close-on-exec, closed in
  // fork()ed children): it reads alive until the process exits or execs,
  // whatever pid namespace it and its readers are in.
  Result<int> RegisterClient(pid_t pid);
  // The group slot for (device, name), created if needed; params applied.
  // With the table full, slots of groups no live process is in (idle for
  // tuning().group_reclaim_idle_ns) are freed first. -1 if none is.
  int JoinGroup(int device, int client, const std::string& name, const GroupParams& params,
                uint64_t now);
  // Runtime change of a group's parameters (vgpud, tests); takes effect at the next refill.
  bool SetGroupParams(int device, const std::string& name, const GroupParams& params);

  // Adds rate x elapsed wall time to every group's bucket (at most one
  // process does it for a given interval, and at most one per
  // tuning().refill_interval_ns: many waiters must not each pay a pass).
  void Refill(int device, uint64_t now);
  // The client that should hold the lease next, -1 if none may.
  int PickNext(int device, int exclude, uint64_t now) const;
  // Whether the holder `me` should give the lease up now.
  bool ShouldYield(int device, int me, uint64_t now) const;

  void SetDemand(int device, int client, uint64_t now);
  void ClearDemand(int device, int client);
  // Takes the lease if it is free (or its holder is dead) and `me` is the pick.
  bool TryAcquire(int device, int me, uint64_t now);
  // Gives the lease to the next pick (or nobody) and wakes the waiters.
  void Release(int device, int me, uint64_t now);
  void Charge(int device, int group, uint64_t busy_ns, uint64_t now);

  // A waiter reads TurnSeq before it asks for the lease, then sleeps in
  // WaitForTurn until the lease is handed to it (or freed) or timeout_ns passes.
  uint32_t TurnSeq(int client) const { return layout_->clients[client].turn.load(); }
  void WaitForTurn(int client, uint32_t seen, uint64_t timeout_ns);
  // How long a waiter sleeps at most before it looks again (a hand-over to
  // it or a freed lease wakes it sooner): 10 ms while a live process holds
  // the lease (a dead one's is taken over after 10 ms); with the lease free,
  // until its capped bucket has enough for a turn (0.2-10 ms), else 1 ms.
  // Hundreds of waiters polling a free lease every 1 ms would swamp the CPUs.
  uint64_t WaiterSleepNs(int device, int client) const;

  // Slots in use so far (high-water marks): the bounds of every scan.
  int ClientsInUse() const;
  int GroupsInUse(int device) const;
  // The region's size in bytes (docs/performance.md reports it).
  static constexpr size_t RegionBytes();

  // Frees the client slots of dead processes (and a dead holder's lease),
  // this process's earlier images (before an exec) included.
  void ReapDead();
  // ReapDead by one process of the node per kReapIntervalNs: every
  // accountant calls it, and each pass reads /proc for every client.
  void ReapDeadIfDue(uint64_t now);
  // Gives this process's client slot back (cuInit failed after registering).
  void Unregister(int client);
  // Whether slot c's process lives: its lock is held (one fcntl).
  bool ClientAlive(int c) const;

  // The name's hash, nonzero, within kGroupHashMask.
  static uint64_t GroupKey(const std::string& name);
  // A tenant's group as the node's region knows it: a uid other than root
  // gets "@uid<uid>" appended, so that users who pick the same VGPU_GROUP
  // never share (take from) one bucket. Root's names are its own (the
  // containers' groups are their ids, fixed by the hook).
  static std::string TenantGroupName(const std::string& group, uid_t uid);

 private:
  SchedRegion() = default;
  int64_t BurstCap(double rate) const;
  int64_t TopWeightedTokens(int device, const GroupSet& active) const;
  // Sets of groups: those that demanded or used the device within the
  // active window, hold the lease or wait for it ...
  GroupSet ActiveGroups(int device, uint64_t now) const;
  // ... and the high-priority ones within their idle window.
  GroupSet ActiveHighPriorityGroups(int device, uint64_t now) const;
  bool Eligible(int device, int client, const GroupSet& high_priority_active) const;
  void FreeClient(int c, int32_t pid);
  // After a lease change: wakes the new holder, or every waiter if it is free.
  void LeaseChanged(int device);
  // Group slot lifecycle (JoinGroup).
  int FindGroup(int device, uint64_t key) const;
  int ClaimGroup(int device, uint64_t key, const std::string& name, const GroupParams& params,
                 uint64_t now);
  static void ResetGroup(SchedGroup& g, const std::string& name, const GroupParams& params,
                         uint64_t now);
  static void ApplyParams(SchedGroup& g, const GroupParams& p);
  bool EnterGroup(int device, int client, int g, uint64_t key, uint64_t now);
  GroupSet ReferencedGroups(int device) const;
  GroupSet IdleGroups(int device, uint64_t now, uint64_t idle_ns) const;
  bool MakeRoom(int device, uint64_t now, bool steal);
  GroupSet FreeGroups(int device, GroupSet candidates, uint64_t now, uint64_t idle_ns, bool steal);

  // The descriptor of this process's liveness locks; kIo with a one-line
  // reason if it cannot be had.
  Result<int> LockFd();

  SchedLayout* layout_ = nullptr;
  size_t bytes_ = 0;
  bool shared_ = false;
  int fd_ = -1;                      // the region's file: mapped, and the liveness probe
  int lock_entry_ = -1;              // this object's lock descriptor in the fork registry
  std::bitset<kSchedClients> mine_;  // slots this object registered (locked)
  SchedTuning tuning_;
  // This process's last liveness check of each device's holder.
  std::atomic<uint64_t> alive_checked_ns_[kSchedDevices] = {};
};

constexpr size_t SchedRegion::RegionBytes() { return sizeof(SchedLayout); }

}  // namespace vgpu
