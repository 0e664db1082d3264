#include "share/sched_region.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/atomic_ops.h"
#include "common/futex.h"
#include "common/process_info.h"
#include "common/shm_region.h"

namespace vgpu {
namespace {

constexpr uint64_t kMaxRefillNs = 100'000'000;  // a stalled refiller never floods buckets

static_assert(ShmRegionHeaderMatches<SchedLayout>());

// Adds group slot g to a set; an index out of range (-1: no group) adds nothing.
void AddGroup(GroupSet& set, int g) {
  if (g >= 0 && g < kSchedGroups) set.set(static_cast<size_t>(g));
}
bool HasGroup(const GroupSet& set, int g) {
  return g >= 0 && g < kSchedGroups && set.test(static_cast<size_t>(g));
}
// Whether `set` holds a group other than g.
bool HasOtherThan(GroupSet set, int g) {
  if (g >= 0 && g < kSchedGroups) set.reset(static_cast<size_t>(g));
  return set.any();
}

// The display name, stored char by char as atomics: only such a stalled
// claimer writes it concurrently with another (see ResetGroup).
void StoreName(char (&dst)[64], const std::string& name) {
  size_t n = std::min(name.size(), sizeof dst - 1);
  for (size_t i = 0; i < sizeof dst; ++i) {
    std::atomic_ref<char>(dst[i]).store(i < n ? name[i] : '\0', std::memory_order_relaxed);
  }
}

// Liveness. A client is alive while its byte past the layout in the region
// file is locked with an open-file-description lock (F_OFD_SETLK): the kernel
// drops it when the process exits, is killed or execs (the descriptor is
// close-on-exec), whatever pid namespace anybody is in, and a reused pid
// cannot take it over. Pids were the key before version 4: they mean nothing
// across containers, and /proc of one container cannot see another's.
off_t LockOffset(int c) { return static_cast<off_t>(sizeof(SchedLayout)) + c; }

// One lock request on slot c's byte (zeroed: l_pid must be 0 for OFD locks).
struct flock LockRequest(int c, short type) {
  struct flock fl;
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = LockOffset(c);
  fl.l_len = 1;
  return fl;
}

// The lock descriptors of every SchedRegion of this process (fd + 1; 0:
// none). A fork()ed child shares its parent's open file descriptions, and
// with them the locks: it closes its copies at once (pthread_atfork), so a
// child that outlives its parent does not keep the parent's slots alive.
constexpr int kLockEntries = 64;
std::atomic<int> g_lock_fds[kLockEntries];

void CloseLockFdsInChild() {
  for (auto& e : g_lock_fds) {
    int v = e.exchange(0);
    if (v > 0) close(v - 1);
  }
}

int AddLockEntry(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, CloseLockFdsInChild); });
  for (int i = 0; i < kLockEntries; ++i) {
    int expected = 0;
    if (g_lock_fds[i].compare_exchange_strong(expected, fd + 1)) return i;
  }
  return -1;
}

std::mutex g_lock_fd_mutex;  // opening a lock descriptor (registration only)

void InitLayout(SchedLayout* l) {
  l->magic = kSchedMagic;
  l->version = kSchedVersion;
  l->region_bytes = sizeof(SchedLayout);
  for (auto& d : l->devices) d.holder.store(-1);
  for (auto& c : l->clients) {
    for (auto& g : c.group) g.store(-1);
  }
  l->ready.store(1, std::memory_order_release);
}

}  // namespace

uint64_t SchedRegion::GroupKey(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  h = (h ^ (h >> kGroupHashBits)) & kGroupHashMask;  // the rest of a key holds reclaim marks
  return h == 0 ? 1 : h;
}

std::string SchedRegion::TenantGroupName(const std::string& group, uid_t uid) {
  return uid == 0 ? group : group + "@uid" + std::to_string(uid);
}

std::unique_ptr<SchedRegion> SchedRegion::CreatePrivate() {
  // A file of its own (memfd), not anonymous memory: liveness locks need one.
  int fd = memfd_create("vgpu-sched-private", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (ftruncate(fd, sizeof(SchedLayout)) == 0) {
    p = mmap(nullptr, sizeof(SchedLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  std::unique_ptr<SchedRegion> r(new SchedRegion());
  r->layout_ = static_cast<SchedLayout*>(p);
  r->bytes_ = sizeof(SchedLayout);
  r->fd_ = fd;
  InitLayout(r->layout_);
  return r;
}

Result<std::unique_ptr<SchedRegion>> SchedRegion::Open(const std::string& name) {
  ShmRegionSpec spec{.name = name.empty() ? kNodeSchedRegion : name,
                     .what = "scheduler region",
                     .magic = kSchedMagic,
                     .version = kSchedVersion,
                     .bytes = sizeof(SchedLayout),
                     .node_wide = true,
                     .keep_fd = true};
  Result<ShmRegionMapping> opened = OpenShmRegion(spec);
  if (!opened.ok()) return opened.status();
  const ShmRegionMapping& m = opened.value();
  std::unique_ptr<SchedRegion> r(new SchedRegion());
  r->layout_ = static_cast<SchedLayout*>(m.addr);
  r->bytes_ = sizeof(SchedLayout);
  r->shared_ = true;
  r->fd_ = m.fd;
  if (m.created) InitLayout(r->layout_);
  return r;
}

SchedRegion::~SchedRegion() {
  if (layout_ != nullptr) munmap(layout_, bytes_);
  if (lock_entry_ >= 0) {
    int v = g_lock_fds[lock_entry_].exchange(0);
    if (v > 0) close(v - 1);  // drops this object's clients' locks
  }
  if (fd_ >= 0) close(fd_);
}

Result<int> SchedRegion::LockFd() {
  std::lock_guard<std::mutex> lock(g_lock_fd_mutex);
  if (lock_entry_ >= 0) {
    int v = g_lock_fds[lock_entry_].load();
    if (v > 0) return v - 1;
  }
  // A description of its own (reopened, not dup()ed): the probe descriptor
  // fd_ must see this one's locks as another's.
  const std::string path = "/proc/self/fd/" + std::to_string(fd_);
  int fd = fd_ < 0 ? -1 : open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return Status::Error(ErrorCode::kIo, "cannot reopen the scheduler region (" + path +
                                             "): " + std::strerror(errno));
  }
  if (lock_entry_ >= 0) {
    g_lock_fds[lock_entry_].store(fd + 1);  // the entry this fork()ed child's copy left
  } else if ((lock_entry_ = AddLockEntry(fd)) < 0) {
    close(fd);
    return Status::Error(ErrorCode::kIo, "too many scheduler regions open in this process");
  }
  return fd;
}

Result<int> SchedRegion::RegisterClient(pid_t pid) {
  Result<int> locks = LockFd();
  if (!locks.ok()) return locks.status();
  const int lock_fd = locks.value();
  const uint64_t ns = PidNamespaceId();
  for (int pass = 0; pass < 2; ++pass) {
    for (int c = 0; c < kSchedClients; ++c) {
      SchedClient& cl = layout_->clients[c];
      int32_t expected = 0;
      if (!cl.pid.compare_exchange_strong(expected, -pid)) continue;
      struct flock fl = LockRequest(c, F_WRLCK);
      if (fcntl(lock_fd, F_OFD_SETLK, &fl) != 0) {
        const int err = errno;
        cl.pid.store(0, std::memory_order_release);
        if (err == EAGAIN || err == EACCES) continue;  // a stalled unregister still holds it
        return Status::Error(ErrorCode::kIo,
                             std::string("cannot lock a scheduler slot: ") + std::strerror(err));
      }
      {
        std::lock_guard<std::mutex> lock(g_lock_fd_mutex);
        mine_.set(static_cast<size_t>(c));
      }
      cl.pid_ns.store(ns);
      for (auto& g : cl.group) g.store(-1);
      for (auto& d : cl.demand_since_ns) d.store(0);
      RaiseTo(layout_->clients_hwm, static_cast<uint32_t>(c) + 1);  // before it can be seen
      cl.pid.store(pid, std::memory_order_release);
      return c;
    }
    ReapDead();
  }
  return Status::Error(ErrorCode::kBusy, "the client table is full");
}

int SchedRegion::JoinGroup(int device, int client, const std::string& name,
                           const GroupParams& params, uint64_t now) {
  const uint64_t key = GroupKey(name);
  // Retries follow races: a slot freed or taken under us, another
  // process's reclaim in progress.
  constexpr int kJoinAttempts = 16;
  for (int attempt = 0; attempt < kJoinAttempts; ++attempt) {
    int g = FindGroup(device, key);
    if (g < 0) g = ClaimGroup(device, key, name, params, now);
    if (g < 0) {
      if (attempt == 0) ReapDead();  // dead members keep their groups' slots
      // Another reclaimer's marks are taken over only late: it is most
      // likely alive and about to free those slots.
      if (!MakeRoom(device, now, attempt >= kJoinAttempts / 2)) return -1;
      continue;
    }
    if (EnterGroup(device, client, g, key, now)) {
      ApplyParams(layout_->devices[device].groups[g], params);
      return g;
    }
  }
  return -1;
}

int SchedRegion::ClientsInUse() const {
  return std::min<int>(static_cast<int>(layout_->clients_hwm.load()), kSchedClients);
}

int SchedRegion::GroupsInUse(int device) const {
  return std::min<int>(static_cast<int>(layout_->devices[device].groups_hwm.load()), kSchedGroups);
}

int SchedRegion::FindGroup(int device, uint64_t key) const {
  const SchedDevice& dev = layout_->devices[device];
  const int end = GroupsInUse(device);
  for (int g = 0; g < end; ++g) {
    if ((dev.groups[g].key.load() & kGroupHashMask) == key) return g;  // in use or being reclaimed
  }
  return -1;
}

int SchedRegion::ClaimGroup(int device, uint64_t key, const std::string& name,
                            const GroupParams& params, uint64_t now) {
  SchedDevice& dev = layout_->devices[device];
  for (int g = 0; g < kSchedGroups; ++g) {
    uint64_t expected = 0;
    if (!dev.groups[g].key.compare_exchange_strong(expected, key)) continue;
    RaiseTo(dev.groups_hwm, static_cast<uint32_t>(g) + 1);
    ResetGroup(dev.groups[g], name, params, now);
    // A racing process may have claimed an earlier slot for the same group:
    // the earlier one wins. Ours is given back like an idle group's, so a
    // process that found it meanwhile keeps it.
    for (int e = 0; e < g; ++e) {
      if ((dev.groups[e].key.load() & kGroupHashMask) != key) continue;
      GroupSet mine;
      AddGroup(mine, g);
      return FreeGroups(device, mine, now, 0, false).any() ? e : g;
    }
    return g;
  }
  return -1;
}

// A claimed slot starts clean: it may have been another group's, and its
// debt, usage and parameters are not the new group's. These stores are not
// one atomic step: a claimer stalled here for longer than the reclaim grace
// could overwrite the fields of a group that got the slot since.
void SchedRegion::ResetGroup(SchedGroup& g, const std::string& name, const GroupParams& params,
                             uint64_t now) {
  g.joined_ns.store(now);  // first, so reclaimers leave the slot alone
  StoreName(g.name, name);
  g.tokens_ns.store(0);
  g.used_ns.store(0);
  g.last_demand_ns.store(0);
  ApplyParams(g, params);
}

// Publishes this client's membership, then checks that the slot is still
// the group's. A reclaimer marks a slot before it looks for members (see
// FreeGroups), so either it sees our membership or we see its mark and take
// the slot back; a slot freed or given to another group meanwhile is left.
bool SchedRegion::EnterGroup(int device, int client, int g, uint64_t key, uint64_t now) {
  SchedGroup& grp = layout_->devices[device].groups[g];
  std::atomic<int32_t>& membership = layout_->clients[client].group[device];
  grp.joined_ns.store(now);
  membership.store(g);
  uint64_t w = grp.key.load();
  while ((w & kGroupHashMask) == key) {
    if (w == key || grp.key.compare_exchange_strong(w, key)) return true;
  }
  membership.store(-1);
  return false;
}

// The table is full: frees the slots of groups no live process is in. False
// if no slot is free, being freed or could be freed: the table is full of
// groups in use.
bool SchedRegion::MakeRoom(int device, uint64_t now, bool steal) {
  const uint64_t idle_ns = tuning_.group_reclaim_idle_ns;
  if (FreeGroups(device, GroupSet().set(), now, idle_ns, steal).any()) return true;
  const SchedDevice& dev = layout_->devices[device];
  GroupSet settled;  // in use, not marked
  for (int gi = 0; gi < kSchedGroups; ++gi) {
    uint64_t w = dev.groups[gi].key.load();
    if (w != 0 && (w & kGroupReclaimMark) == 0) AddGroup(settled, gi);
  }
  const GroupSet reclaimable = IdleGroups(device, now, idle_ns) & ~ReferencedGroups(device);
  if ((~settled | reclaimable).none()) return false;
  sched_yield();  // another process is freeing slots, or just did
  return true;
}

GroupSet SchedRegion::ReferencedGroups(int device) const {
  GroupSet referenced;
  const int end = ClientsInUse();
  for (int c = 0; c < end; ++c) {
    const SchedClient& cl = layout_->clients[c];
    if (cl.pid.load() > 0) AddGroup(referenced, cl.group[device].load());
  }
  return referenced;
}

GroupSet SchedRegion::IdleGroups(int device, uint64_t now, uint64_t idle_ns) const {
  const SchedDevice& dev = layout_->devices[device];
  GroupSet idle;
  const int end = GroupsInUse(device);
  for (int gi = 0; gi < end; ++gi) {
    const SchedGroup& g = dev.groups[gi];
    uint64_t last = std::max(g.last_demand_ns.load(), g.joined_ns.load());
    if (now >= last && now - last >= idle_ns) AddGroup(idle, gi);
  }
  return idle;
}

// Frees those of `candidates` that no live client is in and that nobody
// joined, claimed or used for idle_ns. Lock-free and crash-safe: a slot is
// first marked (key = mark | tag | name hash), then checked, then freed or
// restored, each by a CAS on the key. A joiner takes a marked slot back; with
// `steal`, a reclaimer re-marks another's marked slots (so one killed
// mid-way leaves nothing stuck), and the tag, new for every pass, makes the
// other's late CAS fail.
GroupSet SchedRegion::FreeGroups(int device, GroupSet candidates, uint64_t now, uint64_t idle_ns,
                                 bool steal) {
  SchedDevice& dev = layout_->devices[device];
  candidates &= ~ReferencedGroups(device) & IdleGroups(device, now, idle_ns);
  if (candidates.none()) return {};
  const uint64_t tag = (dev.reclaim_seq.fetch_add(1) & kGroupReclaimTagMask) << kGroupHashBits;
  uint64_t mark[kSchedGroups] = {};
  const int end = GroupsInUse(device);
  for (int gi = 0; gi < end; ++gi) {
    uint64_t w = dev.groups[gi].key.load();
    if (!candidates.test(static_cast<size_t>(gi)) || w == 0) continue;
    if ((w & kGroupReclaimMark) != 0 && !steal) continue;
    uint64_t m = kGroupReclaimMark | tag | (w & kGroupHashMask);
    if (dev.groups[gi].key.compare_exchange_strong(w, m)) mark[gi] = m;
  }
  // Checked again after marking: a member that joined since is seen now.
  const GroupSet keep = ReferencedGroups(device) | ~IdleGroups(device, now, idle_ns);
  GroupSet freed;
  for (int gi = 0; gi < end; ++gi) {
    uint64_t m = mark[gi];
    if (m == 0) continue;
    if (HasGroup(keep, gi)) {
      dev.groups[gi].key.compare_exchange_strong(m, m & kGroupHashMask);
    } else if (dev.groups[gi].key.compare_exchange_strong(m, 0)) {
      AddGroup(freed, gi);
    }
  }
  return freed;
}

void SchedRegion::ApplyParams(SchedGroup& g, const GroupParams& p) {
  g.policy.store(static_cast<uint32_t>(p.policy));
  g.share_permille.store(std::clamp<uint32_t>(p.share_permille, 1, 1000));
  g.weight.store(std::max<uint32_t>(p.weight, 1));
  g.high_priority.store(p.high_priority ? 1 : 0);
}

bool SchedRegion::SetGroupParams(int device, const std::string& name, const GroupParams& p) {
  SchedDevice& dev = layout_->devices[device];
  int g = FindGroup(device, GroupKey(name));
  if (g < 0) return false;
  ApplyParams(dev.groups[g], p);
  return true;
}

// One pass over the clients for all groups: callers test every group, and a
// scan per group would cost groups x clients reads per refill or charge.
GroupSet SchedRegion::ActiveGroups(int device, uint64_t now) const {
  const SchedDevice& dev = layout_->devices[device];
  GroupSet active;
  // The holder's group is active even while its accountant is starved of
  // CPU and has not charged for a while: re-levelling it as idle would wipe
  // out what it owes the others.
  int h = dev.holder.load(std::memory_order_relaxed);
  if (h >= 0 && h < kSchedClients) {
    AddGroup(active, layout_->clients[h].group[device].load(std::memory_order_relaxed));
  }
  // So is a waiter's, however long it has been starved of CPU.
  const int clients = ClientsInUse();
  for (int c = 0; c < clients; ++c) {
    const SchedClient& cl = layout_->clients[c];
    if (cl.pid.load(std::memory_order_relaxed) > 0 &&
        cl.demand_since_ns[device].load(std::memory_order_relaxed) != 0) {
      AddGroup(active, cl.group[device].load(std::memory_order_relaxed));
    }
  }
  GroupSet in_use;
  const int groups = GroupsInUse(device);
  for (int gi = 0; gi < groups; ++gi) {
    const SchedGroup& g = dev.groups[gi];
    if (g.key.load(std::memory_order_relaxed) == 0) continue;
    AddGroup(in_use, gi);
    uint64_t last = g.last_demand_ns.load(std::memory_order_relaxed);
    if (last != 0 && now <= last + tuning_.active_window_ns) AddGroup(active, gi);
  }
  return active & in_use;
}

int64_t SchedRegion::TopWeightedTokens(int device, const GroupSet& active) const {
  int64_t top = 0;
  bool any = false;
  const auto& groups = layout_->devices[device].groups;
  const int end = GroupsInUse(device);
  for (int gi = 0; gi < end; ++gi) {
    const SchedGroup& o = groups[gi];
    bool fixed = static_cast<SchedPolicy>(o.policy.load()) == SchedPolicy::kFixed;
    if (fixed || !HasGroup(active, gi)) continue;
    int64_t t = o.tokens_ns.load();
    top = any ? std::max(top, t) : t;
    any = true;
  }
  return top;
}

int64_t SchedRegion::BurstCap(double rate) const {
  return static_cast<int64_t>(std::max(2e6, rate * static_cast<double>(tuning_.burst_ns)));
}

void SchedRegion::Refill(int device, uint64_t now) {
  SchedDevice& dev = layout_->devices[device];
  uint64_t last = dev.last_refill_ns.load();
  if (now <= last || (last != 0 && now - last < tuning_.refill_interval_ns) ||
      !dev.last_refill_ns.compare_exchange_strong(last, now)) {
    return;
  }
  uint64_t dt = last == 0 ? 0 : std::min(now - last, kMaxRefillNs);
  const GroupSet active = ActiveGroups(device, now);
  const int64_t top = TopWeightedTokens(device, active);  // idle groups do not count in it
  const int end = GroupsInUse(device);
  for (int gi = 0; gi < end; ++gi) {
    SchedGroup& g = dev.groups[gi];
    if (g.key.load(std::memory_order_relaxed) == 0) continue;
    auto policy = static_cast<SchedPolicy>(g.policy.load(std::memory_order_relaxed));
    if (policy != SchedPolicy::kFixed) {
      // Weighted buckets are credited by Charge, not by the clock. An idle one
      // neither banks credit nor keeps debt: it sits level with the most-owed
      // active one, so a returning tenant is next in line (it gets the device
      // back within a minimum slice or two) without credit to hog it.
      if (!HasGroup(active, gi)) g.tokens_ns.store(top);
      continue;
    }
    // A cap refills at its share of wall time, whoever else is active.
    double rate = g.share_permille.load(std::memory_order_relaxed) / 1000.0;
    int64_t cap = BurstCap(rate);
    auto add = static_cast<int64_t>(rate * static_cast<double>(dt));
    int64_t t = g.tokens_ns.load();
    int64_t next = 0;
    do {
      next = std::clamp(t + add, tuning_.debt_floor_ns, cap);
    } while (!g.tokens_ns.compare_exchange_weak(t, next));
  }
}

GroupSet SchedRegion::ActiveHighPriorityGroups(int device, uint64_t now) const {
  const SchedDevice& dev = layout_->devices[device];
  GroupSet active;
  const int end = GroupsInUse(device);
  for (int g = 0; g < end; ++g) {
    const SchedGroup& grp = dev.groups[g];
    if (grp.key.load() == 0 || grp.high_priority.load() == 0) continue;
    uint64_t last = grp.last_demand_ns.load();
    if (last != 0 && now <= last + tuning_.high_priority_idle_ns) AddGroup(active, g);
  }
  return active;
}

bool SchedRegion::Eligible(int device, int c, const GroupSet& high_priority_active) const {
  const SchedClient& cl = layout_->clients[c];
  int g = cl.group[device].load();
  if (cl.pid.load() <= 0 || cl.demand_since_ns[device].load() == 0 || g < 0) return false;
  const SchedGroup& grp = layout_->devices[device].groups[g];
  if (grp.high_priority.load() != 0) return true;
  if (HasOtherThan(high_priority_active, g)) return false;  // another group's
  auto policy = static_cast<SchedPolicy>(grp.policy.load());
  // A capped group starts a turn only with a quarter of its burst banked:
  // turns of several milliseconds, so handovers (each leaves the device idle
  // for a wake-up or two) stay rare, while the bucket never fills up (and
  // loses refill) during another group's turn.
  return policy != SchedPolicy::kFixed ||
         grp.tokens_ns.load() >= BurstCap(grp.share_permille.load() / 1000.0) / 4;
}

int SchedRegion::PickNext(int device, int exclude, uint64_t now) const {
  int best = -1;
  bool best_hp = false;
  int64_t best_tokens = 0;
  uint64_t best_since = 0;
  const GroupSet high_priority_active = ActiveHighPriorityGroups(device, now);
  const int end = ClientsInUse();
  for (int c = 0; c < end; ++c) {
    if (c == exclude || !Eligible(device, c, high_priority_active)) continue;
    const SchedGroup& grp =
        layout_->devices[device].groups[layout_->clients[c].group[device].load()];
    bool hp = grp.high_priority.load() != 0;
    int64_t tokens = grp.tokens_ns.load();
    uint64_t since = layout_->clients[c].demand_since_ns[device].load();
    bool better =
        best < 0 || (hp && !best_hp) ||
        (hp == best_hp && (tokens > best_tokens || (tokens == best_tokens && since < best_since)));
    if (better) best = c, best_hp = hp, best_tokens = tokens, best_since = since;
  }
  return best;
}

bool SchedRegion::ShouldYield(int device, int me, uint64_t now) const {
  const SchedDevice& dev = layout_->devices[device];
  int g = layout_->clients[me].group[device].load();
  if (g < 0) return true;
  const SchedGroup& mine = dev.groups[g];
  bool my_hp = mine.high_priority.load() != 0;
  if (static_cast<SchedPolicy>(mine.policy.load()) == SchedPolicy::kFixed &&
      mine.tokens_ns.load() <= 0) {
    return true;  // a cap holds even on an idle device
  }
  if (!my_hp && HasOtherThan(ActiveHighPriorityGroups(device, now), g)) return true;
  int best = PickNext(device, me, now);
  if (best < 0) return false;
  const SchedGroup& theirs = dev.groups[layout_->clients[best].group[device].load()];
  if (theirs.high_priority.load() != 0 && !my_hp) return true;
  if (&theirs == &mine) return false;  // a group does not preempt itself
  uint64_t slice = now - dev.lease_since_ns.load();
  if (slice < tuning_.min_slice_ns) return false;
  int64_t lead = theirs.tokens_ns.load() - mine.tokens_ns.load();
  if (slice >= tuning_.max_slice_ns) return lead > 0;
  // A waiter that is owed at least as much and has waited a minimum slice
  // takes over: bounds how long a returning tenant waits for its share.
  uint64_t since = layout_->clients[best].demand_since_ns[device].load();
  if (lead >= 0 && since != 0 && now >= since + tuning_.min_slice_ns) return true;
  return lead > static_cast<int64_t>(tuning_.hysteresis_ns);
}

void SchedRegion::SetDemand(int device, int client, uint64_t now) {
  SchedClient& cl = layout_->clients[client];
  uint64_t zero = 0;
  cl.demand_since_ns[device].compare_exchange_strong(zero, now);
  int g = cl.group[device].load();
  if (g >= 0) layout_->devices[device].groups[g].last_demand_ns.store(now);
}

void SchedRegion::ClearDemand(int device, int client) {
  layout_->clients[client].demand_since_ns[device].store(0);
}

bool SchedRegion::TryAcquire(int device, int me, uint64_t now) {
  SchedDevice& dev = layout_->devices[device];
  int h = dev.holder.load();
  if (h == me) return true;
  if (h >= 0) {
    // A holder that died keeps nobody waiting: its lease is taken over. A
    // waiter wakes every millisecond; /proc is read at most every 10 ms.
    constexpr uint64_t kGraceNs = 10'000'000;
    if (now - dev.lease_since_ns.load() < kGraceNs) return false;
    uint64_t checked = alive_checked_ns_[device].load(std::memory_order_relaxed);
    if (now - checked < kGraceNs) return false;
    alive_checked_ns_[device].store(now, std::memory_order_relaxed);
    if (ClientAlive(h)) return false;
    layout_->clients[h].demand_since_ns[device].store(0);  // the dead cannot take it back
    if (dev.holder.compare_exchange_strong(h, -1)) LeaseChanged(device);
    h = -1;
  }
  if (PickNext(device, -1, now) != me) return false;
  if (!dev.holder.compare_exchange_strong(h, me)) return false;
  dev.lease_since_ns.store(now);
  dev.gen.fetch_add(1);
  return true;
}

void SchedRegion::Release(int device, int me, uint64_t now) {
  SchedDevice& dev = layout_->devices[device];
  int next = PickNext(device, me, now);
  int expected = me;
  if (dev.holder.compare_exchange_strong(expected, next)) {
    dev.lease_since_ns.store(now);
    LeaseChanged(device);
  }
}

void SchedRegion::Charge(int device, int group, uint64_t busy_ns, uint64_t now) {
  SchedGroup& g = layout_->devices[device].groups[group];
  if (static_cast<SchedPolicy>(g.policy.load()) != SchedPolicy::kFixed) {
    // Weighted fair share: the GPU time a weighted group used is credited to
    // every active weighted group (itself included) by weight, so buckets
    // sum to a constant and a bucket is exactly that group's lead or lag
    // behind its fair share of the time weighted groups actually got.
    // The active set and weights are read once, so the credits sum to busy_ns.
    uint32_t weight[kSchedGroups];  // 0: not credited
    double weights = 0;
    auto& groups = layout_->devices[device].groups;
    GroupSet active = ActiveGroups(device, now);
    AddGroup(active, group);
    const int end = GroupsInUse(device);
    for (int gi = 0; gi < end; ++gi) {
      const SchedGroup& o = groups[gi];
      bool member =
          HasGroup(active, gi) && static_cast<SchedPolicy>(o.policy.load()) != SchedPolicy::kFixed;
      weight[gi] = member ? std::max<uint32_t>(1, o.weight.load()) : 0;
      weights += weight[gi];
    }
    for (int gi = 0; gi < end; ++gi) {
      if (weight[gi] == 0) continue;
      groups[gi].tokens_ns.fetch_add(
          static_cast<int64_t>(static_cast<double>(busy_ns) * weight[gi] / weights));
    }
  }
  // Weighted buckets are never clamped: a clamp would break the constant sum.
  bool fixed = static_cast<SchedPolicy>(g.policy.load()) == SchedPolicy::kFixed;
  int64_t t = g.tokens_ns.load();
  int64_t next = 0;
  do {
    next = t - static_cast<int64_t>(busy_ns);
    if (fixed) next = std::max(tuning_.debt_floor_ns, next);
  } while (!g.tokens_ns.compare_exchange_weak(t, next));
  g.used_ns.fetch_add(busy_ns, std::memory_order_relaxed);
  g.last_demand_ns.store(now, std::memory_order_relaxed);
}

void SchedRegion::WaitForTurn(int client, uint32_t seen, uint64_t timeout_ns) {
  FutexWait(&layout_->clients[client].turn, seen, timeout_ns, FutexScope::kShared);
}

uint64_t SchedRegion::WaiterSleepNs(int device, int client) const {
  constexpr uint64_t kMs = 1'000'000;
  const SchedDevice& dev = layout_->devices[device];
  if (dev.holder.load() >= 0) return 10 * kMs;
  int g = layout_->clients[client].group[device].load();
  if (g < 0 || g >= kSchedGroups) return kMs;
  const SchedGroup& grp = dev.groups[g];
  if (static_cast<SchedPolicy>(grp.policy.load()) != SchedPolicy::kFixed) return kMs;
  double rate = grp.share_permille.load() / 1000.0;
  auto missing = static_cast<double>(BurstCap(rate) / 4 - grp.tokens_ns.load());
  if (missing <= 0) return kMs;
  return std::clamp<uint64_t>(static_cast<uint64_t>(missing / rate), kMs / 5, 10 * kMs);
}

void SchedRegion::LeaseChanged(int device) {
  SchedDevice& dev = layout_->devices[device];
  dev.gen.fetch_add(1);
  int h = dev.holder.load();
  if (h >= 0 && h < kSchedClients) {
    FutexBumpAndWakeAll(&layout_->clients[h].turn, FutexScope::kShared);  // other processes wait
    return;
  }
  const int end = ClientsInUse();
  for (int c = 0; c < end; ++c) {
    SchedClient& cl = layout_->clients[c];
    if (cl.pid.load() > 0 && cl.demand_since_ns[device].load() != 0) {
      FutexBumpAndWakeAll(&cl.turn, FutexScope::kShared);
    }
  }
}

bool SchedRegion::ClientAlive(int c) const {
  const SchedClient& cl = layout_->clients[c];
  if (cl.pid.load() <= 0) return false;
  struct flock fl = LockRequest(c, F_WRLCK);
  // A probe that fails cannot tell: a live slot must never be freed.
  if (fd_ < 0 || fcntl(fd_, F_OFD_GETLK, &fl) != 0) return true;
  return fl.l_type != F_UNLCK;
}

void SchedRegion::ReapDead() {
  const int end = ClientsInUse();
  for (int c = 0; c < end; ++c) {
    SchedClient& cl = layout_->clients[c];
    int32_t pid = cl.pid.load();
    if (pid <= 0 || ClientAlive(c)) continue;
    FreeClient(c, pid);
  }
}

void SchedRegion::ReapDeadIfDue(uint64_t now) {
  constexpr uint64_t kReapIntervalNs = 100'000'000;
  uint64_t last = layout_->last_reap_ns.load(std::memory_order_relaxed);
  if (now >= last && now - last < kReapIntervalNs) return;
  if (!layout_->last_reap_ns.compare_exchange_strong(last, now)) return;  // another reaps
  ReapDead();
}

void SchedRegion::Unregister(int client) {
  if (client < 0 || client >= kSchedClients) return;
  for (int d = 0; d < kSchedDevices; ++d) layout_->clients[client].group[d].store(-1);
  FreeClient(client, layout_->clients[client].pid.load());
}

// Frees slot c of `pid` (once: a racing reaper loses the CAS), with its
// demand and any lease it holds.
void SchedRegion::FreeClient(int c, int32_t pid) {
  SchedClient& cl = layout_->clients[c];
  if (!cl.pid.compare_exchange_strong(pid, -pid)) return;
  if (std::lock_guard<std::mutex> lock(g_lock_fd_mutex); mine_.test(static_cast<size_t>(c))) {
    // Ours (Unregister): its lock goes too.
    mine_.reset(static_cast<size_t>(c));
    int v = lock_entry_ >= 0 ? g_lock_fds[lock_entry_].load() : 0;
    struct flock fl = LockRequest(c, F_UNLCK);
    if (v > 0) fcntl(v - 1, F_OFD_SETLK, &fl);
  }
  for (int d = 0; d < kSchedDevices; ++d) {
    cl.demand_since_ns[d].store(0);
    int expected = c;
    if (layout_->devices[d].holder.compare_exchange_strong(expected, -1)) LeaseChanged(d);
  }
  cl.pid.store(0, std::memory_order_release);
}

}  // namespace vgpu
