// Walks libvgpu's whole hook list (driver/hook_list.h) in a process that the
// test suspends (hook_policy_test.cc): under LD_PRELOAD=libvgpu.so it
// initializes CUDA, prints ready=1 and waits for a line on stdin (the test
// suspends it meanwhile); then it calls every hook, each on its own thread,
// with value-initialized (harmless: null, zero) arguments, and reports which
// returned while the process was suspended:
//   walked=N, gated_returned=a,b (declared kGate but did not block),
//   ungated_blocked=c,d (declared ungated but did not return), checked=1.
// It then waits for a second line (the test resumes it) and for every call
// to return (stuck=... otherwise), and prints done=1.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "driver/hook_list.h"
#include "driver/nvml_abi.h"
#include "intercept/hook_policy.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename R, typename... A>
void CallWithZeros(void* fn, R (*)(A...)) {
  reinterpret_cast<R (*)(A...)>(fn)(A{}...);
}

struct Hook {
  const char* name;
  void (*call)(void* fn);
  void* fn = nullptr;
  bool gated = false;
  std::atomic<bool> returned{false};
};

#define VGPU_WALK_ENTRY(sym) {#sym, [](void* f) { CallWithZeros(f, static_cast<decltype(&::sym)>(nullptr)); }},
Hook g_hooks[] = {VGPU_CU_HOOKS(VGPU_WALK_ENTRY) VGPU_NVML_HOOKS(VGPU_WALK_ENTRY)};
#undef VGPU_WALK_ENTRY

bool WaitUntil(Clock::duration limit, bool (*done)()) {
  for (auto end = Clock::now() + limit; Clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

bool AllUngatedReturned() {
  for (const Hook& h : g_hooks) {
    if (!h.gated && !h.returned.load()) return false;
  }
  return true;
}

bool AllReturned() {
  for (const Hook& h : g_hooks) {
    if (!h.returned.load()) return false;
  }
  return true;
}

std::string Names(bool gated, bool returned) {
  std::string out;
  for (const Hook& h : g_hooks) {
    if (h.gated == gated && h.returned.load() == returned) out += std::string(out.empty() ? "" : ",") + h.name;
  }
  return out;
}

void Line(const std::string& s) {
  std::fputs((s + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main() {
  // Under LD_PRELOAD the default scope finds libvgpu's exports first.
  for (Hook& h : g_hooks) {
    h.fn = dlsym(RTLD_DEFAULT, h.name);
    h.gated = (vgpu::hook_policy::PoliciesOf(h.name) & vgpu::hook_policy::kGate) != 0;
    if (h.fn == nullptr) Line(std::string("missing=") + h.name);
  }
  auto init = reinterpret_cast<decltype(&::cuInit)>(dlsym(RTLD_DEFAULT, "cuInit"));
  auto retain = reinterpret_cast<decltype(&::cuDevicePrimaryCtxRetain)>(dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain"));
  CUcontext ctx = nullptr;
  if (init == nullptr || init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS) {
    Line("fatal=init");
    return 3;
  }
  Line("ready=1");
  std::string line;
  std::getline(std::cin, line);  // suspended now
  std::vector<std::thread> threads;
  for (Hook& h : g_hooks) {
    if (h.fn == nullptr) {
      h.returned = true;
      continue;
    }
    threads.emplace_back([&h] {
      h.call(h.fn);
      h.returned = true;
    });
  }
  WaitUntil(std::chrono::seconds(10), AllUngatedReturned);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a gated call that would return, does
  Line("walked=" + std::to_string(threads.size()));
  Line("gated_returned=" + Names(true, true));
  Line("ungated_blocked=" + Names(false, false));
  Line("checked=1");
  std::getline(std::cin, line);  // resumed now
  if (!WaitUntil(std::chrono::seconds(10), AllReturned)) Line("stuck=" + Names(true, false) + Names(false, false));
  Line("done=1");
  std::fflush(stdout);
  _exit(0);  // the walk's threads are detached in spirit: no joins, no destructors
}
