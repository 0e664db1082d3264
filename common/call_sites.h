// Allocation call sites (VGPU_TRACE_ALLOCATIONS): which code of the
// application holds how much device memory, and where a refused allocation
// came from. Off by default, and then free: libunwind is not even loaded.
//
// libunwind is dlopen'ed RTLD_LOCAL on Enable(), never linked: its shared
// library exports _Unwind_* and a weak backtrace(), which, loaded into the
// global scope by a preloaded libvgpu, would replace the application's C++
// exception unwinder and glibc's backtrace for the whole process (and Debian's
// static libunwind is not position-independent, so it cannot be linked into
// libvgpu.so instead).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace vgpu {

struct CallSiteStats {
  // The innermost frames outside libvgpu, innermost first, as
  // "module!symbol+0xoff < caller < ...".
  std::string where;
  uint64_t live_bytes = 0;   // held now by allocations made there
  uint64_t live_count = 0;
  uint64_t total_count = 0;  // allocations made there since tracing began
};

class CallSites {
 public:
  static constexpr int kFramesPerSite = 4;  // frames that tell sites apart

  // Loads libunwind. `skip_module`: an address inside the module whose frames
  // are ours (libvgpu), not the application's; nullptr skips none. kNoSys
  // (with a one-line reason) if libunwind cannot be loaded.
  Status Enable(const void* skip_module);
  bool enabled() const { return backtrace_ != nullptr; }

  // The calling thread's site; 0 when disabled.
  uint64_t Capture();
  void OnAlloc(uint64_t key, uint64_t bytes, uint64_t site);
  void OnFree(uint64_t key);
  // Sites by live bytes, largest first (then by count), at most n.
  std::vector<CallSiteStats> Top(size_t n);
  // A captured site as in CallSiteStats::where; "" for 0 or unknown.
  std::string Describe(uint64_t site);

 private:
  using BacktraceFn = int (*)(void**, int);
  struct Site {
    void* frames[kFramesPerSite] = {};
    CallSiteStats stats;
  };
  struct Live {
    uint64_t site = 0;
    uint64_t bytes = 0;
  };
  bool InSkippedModule(const void* pc) const;
  std::string DescribeLocked(const Site& s) const;

  BacktraceFn backtrace_ = nullptr;
  const void* skip_base_ = nullptr;  // load base of the skipped module
  std::mutex mu_;
  std::unordered_map<uint64_t, Site> sites_;
  std::unordered_map<uint64_t, Live> live_;  // by allocation key
};

}  // namespace vgpu
