// Futex wait/wake on a 32-bit atomic word: a waiter sleeps in the kernel
// until the word changes, with microsecond wake-up latency (libstdc++'s
// std::atomic::wait goes through a waiter pool with timed back-off).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace vgpu {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Private futexes are cheaper, but only wake waiters of the same process; a
// word in memory that other processes map (a shared region) needs kShared.
enum class FutexScope { kProcess, kShared };

// Sleeps while *word == seen, for at most timeout_ns; may return early
// (a wake, a signal, or the word already differed), so callers re-check.
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, uint64_t timeout_ns,
                      FutexScope scope) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ull),
              static_cast<long>(timeout_ns % 1'000'000'000ull)};
  int op = scope == FutexScope::kShared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, seen, &ts, nullptr, 0);
}

// Bumps *word and wakes everyone waiting on it. The bump comes first so that
// a waiter about to sleep on the old value sees the change and does not.
inline void FutexBumpAndWakeAll(std::atomic<uint32_t>* word, FutexScope scope) {
  word->fetch_add(1, std::memory_order_seq_cst);
  int op = scope == FutexScope::kShared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace vgpu
