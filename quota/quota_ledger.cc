#include "quota/quota_ledger.h"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "common/atomic_ops.h"
#include "common/process_info.h"
#include "common/shm_region.h"

namespace vgpu {

// The region is shared between processes: every atomic in it must work
// without a lock that would live in one process's memory.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
static_assert(sizeof(LedgerRegion) < UINT32_MAX);
static_assert(ShmRegionHeaderMatches<LedgerRegion>());

namespace {

constexpr size_t kMaxGroupName = 100;
// Bounds on how long a refused reservation keeps trying (see TryReserve).
constexpr int kMaxAttempts = 32;
constexpr int kMaxMisses = 4;

// Overflow-safe a + b, saturating: a sum that does not fit is over any limit.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

// `reserved0` in the header holds the slot high-water mark: one more than the
// highest slot index ever claimed. Sums and reaps scan only [0, high-water),
// so a group of a few processes reads a few slots instead of 512. It only
// grows, and a claimer raises it (seq_cst) before it stores its pid and thus
// before any reservation through the slot; see AddThenCheck for why this keeps
// the no-overshoot argument intact.
std::atomic_ref<uint32_t> HighWater(LedgerRegion* r) {
  return std::atomic_ref<uint32_t>(r->reserved0);
}

uint32_t LoadHighWater(LedgerRegion* r) {
  uint32_t n = HighWater(r).load(std::memory_order_seq_cst);
  return n > static_cast<uint32_t>(kLedgerSlots) ? kLedgerSlots : n;  // damaged: scan all
}

bool ValidGroup(const std::string& group) {
  if (group.size() > kMaxGroupName) return false;
  for (char c : group) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Backs off after a refused request still looked too big: first a yield,
// then sleeps long enough for a preempted reserver to run and back out.
void PauseAfterMiss(int misses) {
  if (misses == 1) {
    sched_yield();
    return;
  }
  timespec ts{0, misses == 2 ? 50000L : 200000L};
  nanosleep(&ts, nullptr);
}

void InitRegion(LedgerRegion* r, const std::string& group, const std::vector<uint64_t>& limits) {
  // The memory is zero (fresh ftruncate or anonymous mapping): slots are free.
  r->magic = kLedgerMagic;
  r->version = kLedgerVersion;
  r->region_bytes = static_cast<uint32_t>(sizeof(LedgerRegion));
  for (int d = 0; d < kLedgerDevices; ++d) {
    size_t i = static_cast<size_t>(d);
    r->limit[d].store(i < limits.size() ? limits[i] : kUnlimited, std::memory_order_relaxed);
  }
  r->generation.store(0, std::memory_order_relaxed);
  std::strncpy(r->group, group.c_str(), sizeof r->group - 1);
  r->ready.store(1, std::memory_order_release);  // publishes everything above
}

// Lowers each limit to the requested one; a member can never raise it.
void ApplyStricterLimits(LedgerRegion* r, const std::vector<uint64_t>& limits) {
  for (size_t i = 0; i < limits.size(); ++i) {
    std::atomic<uint64_t>& lim = r->limit[i];
    uint64_t cur = lim.load(std::memory_order_seq_cst);
    bool lowered = false;
    while (limits[i] < cur) {
      if (lim.compare_exchange_weak(cur, limits[i], std::memory_order_seq_cst)) {
        lowered = true;
        break;
      }
    }
    if (lowered) r->generation.fetch_add(1, std::memory_order_seq_cst);
  }
}

// Sums every slot, seq_cst; a slot that is free holds 0, so there is no need
// to look at pids (and no window where a claimed slot is skipped).
uint64_t SumUsed(LedgerRegion* region, int d) {
  const uint32_t n = LoadHighWater(region);
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    total = SaturatingAdd(total, region->slots[i].used[d].load(std::memory_order_seq_cst));
  }
  return total;
}

enum class Attempt { kOk, kOver, kNeverFits };

// Tests only (SetStepHook): pauses a reservation between its steps. Static
// so that the reservation path carries no pointer for it.
std::atomic<QuotaLedger::StepHook> g_step_hook{nullptr};

void StepHookPoint(int d, uint64_t bytes) {
  if (QuotaLedger::StepHook hook = g_step_hook.load(std::memory_order_relaxed)) hook(d, bytes);
}

// Why add-then-sum never overshoots: every step below is seq_cst, so all of
// them sit in one total order S. Take any two reservations A and B that both
// succeed and are held at the same time, and say A's add comes first in S.
// B's add is sequenced before B's loads, so A's add precedes B's load of A's
// slot (and of the high-water mark, which A's claimer raised before A could
// add), and that load sees A's bytes. So the later of any set of concurrent
// successful reservations counted all the others and its own: their total
// was <= limit. A reservation that saw too much backs its bytes out; that can
// only make others fail spuriously (handled by retrying), never succeed wrongly.
Attempt AddThenCheck(LedgerRegion* region, LedgerSlot* self, int d, uint64_t bytes) {
  const uint64_t limit = region->limit[d].load(std::memory_order_seq_cst);
  if (bytes > limit) return Attempt::kNeverFits;
  std::atomic<uint64_t>& mine = self->used[d];
  // Add to our own slot. The CAS (only our own threads contend on it) keeps
  // the slot <= limit so it never wraps, and fails early when our own
  // usage alone is too much.
  uint64_t cur = mine.load(std::memory_order_seq_cst);
  do {
    if (limit != kUnlimited && cur > limit - bytes) return Attempt::kOver;
    if (limit == kUnlimited && cur > UINT64_MAX - bytes) return Attempt::kNeverFits;
  } while (!mine.compare_exchange_weak(cur, cur + bytes, std::memory_order_seq_cst));
  // The limit is read again after the add (and after the sum): TrySetLimit
  // stores a new limit before it sums. Either a reload comes after that
  // store (and we check against the new limit) or our add came before it
  // (and the setter's sum counts our bytes), so a limit lowered at runtime
  // is never overshot by a racer, even one that started unlimited.
  if (limit == kUnlimited && region->limit[d].load(std::memory_order_seq_cst) == kUnlimited) {
    return Attempt::kOk;  // counted for Used(), nothing to check
  }
  StepHookPoint(d, bytes);
  if (SumUsed(region, d) <= std::min(limit, region->limit[d].load(std::memory_order_seq_cst))) {
    return Attempt::kOk;
  }
  SubtractAtMost(mine, bytes);
  return Attempt::kOver;
}

// A negative pid names the process that is claiming or reaping the slot
// (-claimer or -reaper, never the dead owner, so two reapers cannot both
// zero a slot that meanwhile changed hands). If that process is gone it was
// killed mid-way and we take the slot over the same way.
uint64_t ReapSlot(LedgerSlot* slot, pid_t me) {
  int32_t pid = slot->pid.load(std::memory_order_acquire);
  if (pid == 0) return 0;
  if (pid > 0) {
    if (ProcessAlive(pid, slot->start_time.load(std::memory_order_relaxed))) return 0;
  } else if (ProcessStartTime(-pid) != 0) {
    return 0;  // a live process is claiming or reaping it
  }
  if (!slot->pid.compare_exchange_strong(pid, -me, std::memory_order_acq_rel)) return 0;
  // The slot may have been freed and claimed again by a new process with the
  // same pid since we looked: check again now that nobody else can change it.
  if (pid > 0 && ProcessAlive(pid, slot->start_time.load(std::memory_order_relaxed))) {
    slot->pid.store(pid, std::memory_order_release);
    return 0;
  }
  uint64_t returned = 0;
  for (auto& u : slot->used) returned = SaturatingAdd(returned, u.exchange(0));
  slot->start_time.store(0, std::memory_order_relaxed);
  slot->pid.store(0, std::memory_order_release);
  return returned;
}

}  // namespace

std::string QuotaLedger::ShmName(const std::string& group) {
  return "/vgpu-ledger-" + std::to_string(geteuid()) + "-" + group;
}

Result<std::unique_ptr<QuotaLedger>> QuotaLedger::Open(const std::string& group,
                                                       const std::vector<uint64_t>& limits) {
  if (limits.size() > static_cast<size_t>(kLedgerDevices)) {
    return Status::Error(ErrorCode::kInval, "quota ledger: " + std::to_string(limits.size()) +
                                                " device limits, at most " +
                                                std::to_string(kLedgerDevices) + " devices");
  }
  std::unique_ptr<QuotaLedger> ledger(new QuotaLedger());
  ledger->self_pid_ = getpid();
  ledger->mapped_bytes_ = sizeof(LedgerRegion);
  if (group.empty()) {
    // Private: shared with fork()ed children only, so they draw from our quota.
    void* p = MapPrivateRegion(sizeof(LedgerRegion));
    if (p == nullptr) {
      return Status::Error(ErrorCode::kNoMem,
                           std::string("quota ledger: mmap: ") + std::strerror(errno));
    }
    ledger->region_ = static_cast<LedgerRegion*>(p);
    InitRegion(ledger->region_, group, limits);
    return ledger;
  }
  if (!ValidGroup(group)) {
    return Status::Error(ErrorCode::kInval, "quota ledger: invalid group name \"" +
                                                group.substr(0, kMaxGroupName) +
                                                "\": use at most 100 of [A-Za-z0-9._-]");
  }
  Result<ShmRegionMapping> opened = OpenShmRegion({.name = ShmName(group),
                                                   .what = "quota ledger",
                                                   .magic = kLedgerMagic,
                                                   .version = kLedgerVersion,
                                                   .bytes = sizeof(LedgerRegion)});
  if (!opened.ok()) return opened.status();
  const ShmRegionMapping& m = opened.value();
  ledger->region_ = static_cast<LedgerRegion*>(m.addr);
  if (m.created) {
    InitRegion(ledger->region_, group, limits);
  } else {
    ApplyStricterLimits(ledger->region_, limits);
  }
  // What this process was before an exec holds nothing any more.
  ledger->ReleasePreviousImages(nullptr, getpid(), ProcessStartTime(getpid()));
  return ledger;
}

QuotaLedger::~QuotaLedger() {
  if (region_ == nullptr) return;
  // Give our slot back only if it holds nothing: memory still allocated stays
  // counted until the process is gone and its slot is reaped.
  LedgerSlot* s = self_.load(std::memory_order_acquire);
  int32_t me = static_cast<int32_t>(getpid());
  if (s != nullptr && s->pid.compare_exchange_strong(me, -me, std::memory_order_acq_rel)) {
    bool empty = true;
    for (auto& u : s->used) empty = empty && u.load(std::memory_order_seq_cst) == 0;
    if (empty) s->start_time.store(0, std::memory_order_relaxed);
    s->pid.store(empty ? 0 : static_cast<int32_t>(getpid()), std::memory_order_release);
  }
  munmap(region_, mapped_bytes_);
}

// exec() ends the old image and, with it, its device memory; its slot keeps
// our pid and start time, so only the image id tells it apart.
void QuotaLedger::ReleasePreviousImages(LedgerSlot* mine, pid_t pid, uint64_t start) {
  const uint64_t image = ProcessImageId();
  for (int i = 0; i < kLedgerSlots; ++i) {
    LedgerSlot& slot = region_->slots[i];
    int32_t p = slot.pid.load();
    if (&slot == mine || p != pid || slot.start_time.load() != start ||
        slot.image_id.load() == image) {
      continue;
    }
    if (!slot.pid.compare_exchange_strong(p, -pid)) continue;
    for (auto& u : slot.used) u.store(0, std::memory_order_seq_cst);
    slot.pid.store(0, std::memory_order_release);
  }
}

bool QuotaLedger::Join() { return Self() != nullptr; }

LedgerSlot* QuotaLedger::Self() {
  LedgerSlot* s = self_.load(std::memory_order_acquire);
  if (s != nullptr) return s;
  const pid_t pid = getpid();
  const uint64_t start = ProcessStartTime(pid);
  for (int pass = 0; pass < 2 && s == nullptr; ++pass) {
    if (pass == 1) ReapDead();  // the table is full: make room
    for (int i = 0; i < kLedgerSlots && s == nullptr; ++i) {
      LedgerSlot& slot = region_->slots[i];
      int32_t expected = 0;
      if (slot.pid.load(std::memory_order_relaxed) != 0) continue;
      if (!slot.pid.compare_exchange_strong(expected, -pid, std::memory_order_acq_rel)) continue;
      slot.start_time.store(start, std::memory_order_relaxed);
      slot.image_id.store(ProcessImageId(), std::memory_order_relaxed);
      for (auto& u : slot.used) u.store(0, std::memory_order_seq_cst);
      RaiseTo(HighWater(region_), static_cast<uint32_t>(i) + 1);
      slot.pid.store(pid, std::memory_order_release);
      s = &slot;
    }
  }
  if (s == nullptr) return nullptr;  // 512 live members: the caller fails closed
  // Two threads may claim at once; the loser gives its (empty) slot back.
  LedgerSlot* expected = nullptr;
  if (!self_.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) {
    s->pid.store(0, std::memory_order_release);
    return expected;
  }
  ReleasePreviousImages(s, pid, start);
  return s;
}

// A refusal may be spurious: a concurrent reservation that will itself back
// off was counted (it may even be preempted between its add and its back-off).
// So after a refusal we reap dead members once, then retry (bounded) while the
// request fits beside everything else; when it does not, we wait a little
// longer each time (yield, 50 us, 200 us) for in-flight requests to clear, and
// after kMaxMisses such looks the refusal is real. A real refusal thus costs a
// reap and about 0.3 ms. Retries use the same add-then-sum step, so they can
// never overshoot.
bool QuotaLedger::TryReserve(int d, uint64_t bytes) {
  if (d < 0 || d >= kLedgerDevices) return false;
  if (bytes == 0) return true;
  LedgerSlot* self = Self();
  if (self == nullptr) return false;
  bool reaped = false;
  int misses = 0;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    switch (AddThenCheck(region_, self, d, bytes)) {
      case Attempt::kOk:
        return true;
      case Attempt::kNeverFits:
        return false;
      case Attempt::kOver:
        break;
    }
    if (!reaped) {
      reaped = true;
      if (ReapDead() > 0) continue;
    }
    const uint64_t limit = region_->limit[d].load(std::memory_order_seq_cst);
    if (SaturatingAdd(SumUsed(region_, d), bytes) <= limit) {
      sched_yield();  // fits now: someone else's in-flight add got in the way
      continue;
    }
    if (++misses >= kMaxMisses) return false;
    PauseAfterMiss(misses);
  }
  return false;
}

void QuotaLedger::SetStepHookForTest(StepHook hook) { g_step_hook.store(hook); }

void QuotaLedger::Release(int d, uint64_t bytes) {
  if (d < 0 || d >= kLedgerDevices || bytes == 0) return;
  LedgerSlot* self = self_.load(std::memory_order_acquire);
  if (self == nullptr) return;  // nothing was reserved by this process
  SubtractAtMost(self->used[d], bytes);
}

uint64_t QuotaLedger::Used(int d) const {
  if (d < 0 || d >= kLedgerDevices) return 0;
  return SumUsed(region_, d);
}

uint64_t QuotaLedger::Limit(int d) const {
  if (d < 0 || d >= kLedgerDevices) return 0;  // no such device: nothing to allocate
  return region_->limit[d].load(std::memory_order_seq_cst);
}

uint64_t QuotaLedger::SelfUsed(int d) const {
  if (d < 0 || d >= kLedgerDevices) return 0;
  LedgerSlot* self = self_.load(std::memory_order_acquire);
  return self == nullptr ? 0 : self->used[d].load(std::memory_order_seq_cst);
}

void QuotaLedger::SetLimit(int d, uint64_t bytes) {
  if (d < 0 || d >= kLedgerDevices) return;
  region_->limit[d].store(bytes, std::memory_order_seq_cst);
  region_->generation.fetch_add(1, std::memory_order_seq_cst);
}

bool QuotaLedger::TrySetLimit(int d, uint64_t bytes, uint64_t* used) {
  uint64_t ignored = 0;
  if (used == nullptr) used = &ignored;
  *used = 0;
  if (d < 0 || d >= kLedgerDevices) return false;
  std::atomic<uint64_t>& lim = region_->limit[d];
  const uint64_t old = lim.exchange(bytes, std::memory_order_seq_cst);
  if (bytes >= old) {  // raising never strands anybody
    region_->generation.fetch_add(1, std::memory_order_seq_cst);
    return true;
  }
  ReapDead();  // the dead's bytes are not usage
  *used = SumUsed(region_, d);
  if (*used <= bytes) {
    region_->generation.fetch_add(1, std::memory_order_seq_cst);
    return true;
  }
  // Put the old limit back unless someone changed it meanwhile (theirs wins).
  uint64_t mine = bytes;
  lim.compare_exchange_strong(mine, old, std::memory_order_seq_cst);
  return false;
}

void QuotaLedger::OnForkChild() {
  // The parent's slot keeps the parent's usage; the child claims its own.
  self_.store(nullptr, std::memory_order_release);
  self_pid_ = getpid();
}

uint64_t QuotaLedger::ReapDead() {
  const pid_t me = getpid();
  // Without a readable /proc every owner would look dead: reap nothing.
  if (ProcessStartTime(me) == 0) return 0;
  const uint32_t n = LoadHighWater(region_);
  uint64_t returned = 0;
  for (uint32_t i = 0; i < n; ++i) {
    returned = SaturatingAdd(returned, ReapSlot(&region_->slots[i], me));
  }
  return returned;
}

MemoryView QuotaMemoryView(uint64_t limit, uint64_t used, uint64_t device_total,
                           uint64_t device_free) {
  MemoryView v;
  v.total = std::min(limit, device_total);
  v.used = used;
  v.free = std::min(used >= limit ? 0 : limit - used, device_free);
  return v;
}

}  // namespace vgpu
