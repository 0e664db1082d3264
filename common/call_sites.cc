#include "common/call_sites.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace vgpu {
namespace {

const void* ModuleBase(const void* addr) {
  Dl_info info{};
  return addr != nullptr && dladdr(addr, &info) != 0 ? info.dli_fbase : nullptr;
}

uint64_t HashFrames(void* const* frames, int n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the addresses
  for (int i = 0; i < n; ++i) {
    auto v = reinterpret_cast<uintptr_t>(frames[i]);
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h != 0 ? h : 1;
}

}  // namespace

Status CallSites::Enable(const void* skip_module) {
  if (enabled()) return Status::Ok();
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return Status::Error(ErrorCode::kNoSys,
                         std::string("cannot load libunwind.so.8 (") + dlerror() + ")");
  }
  auto fn = reinterpret_cast<BacktraceFn>(dlsym(lib, "unw_backtrace"));
  if (fn == nullptr) return Status::Error(ErrorCode::kNoSys, "libunwind.so.8 has no unw_backtrace");
  skip_base_ = ModuleBase(skip_module);
  backtrace_ = fn;
  return Status::Ok();
}

bool CallSites::InSkippedModule(const void* pc) const {
  return skip_base_ != nullptr && ModuleBase(pc) == skip_base_;
}

uint64_t CallSites::Capture() {
  if (!enabled()) return 0;
  void* frames[32];
  int n = backtrace_(frames, 32);
  int first = 1;  // frames[0] is this function
  while (first < n && InSkippedModule(frames[first])) ++first;
  if (first >= n) return 0;
  int count = std::min(kFramesPerSite, n - first);
  uint64_t id = HashFrames(frames + first, count);
  std::lock_guard<std::mutex> lock(mu_);
  Site& s = sites_[id];
  if (s.frames[0] == nullptr) std::copy(frames + first, frames + first + count, s.frames);
  return id;
}

void CallSites::OnAlloc(uint64_t key, uint64_t bytes, uint64_t site) {
  if (site == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sites_.find(site);
  if (it == sites_.end()) return;
  auto [old, fresh] = live_.try_emplace(key, Live{site, bytes});
  if (!fresh) {  // the key's memory was freed behind our back (its context died)
    Site& prev = sites_[old->second.site];
    prev.stats.live_bytes -= old->second.bytes;
    --prev.stats.live_count;
    old->second = Live{site, bytes};
  }
  it->second.stats.live_bytes += bytes;
  ++it->second.stats.live_count;
  ++it->second.stats.total_count;
}

void CallSites::OnFree(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(key);
  if (it == live_.end()) return;
  Site& s = sites_[it->second.site];
  s.stats.live_bytes -= it->second.bytes;
  --s.stats.live_count;
  live_.erase(it);
}

static std::string DescribeFrame(const void* frame) {
  Dl_info info{};
  if (dladdr(frame, &info) == 0) return "?";
  const char* module = info.dli_fname != nullptr ? std::strrchr(info.dli_fname, '/') : nullptr;
  module = module != nullptr ? module + 1 : (info.dli_fname != nullptr ? info.dli_fname : "?");
  char buf[512];
  auto pc = reinterpret_cast<uintptr_t>(frame);
  if (info.dli_sname != nullptr) {
    std::snprintf(buf, sizeof buf, "%s!%s+0x%zx", module, info.dli_sname,
                  static_cast<size_t>(pc - reinterpret_cast<uintptr_t>(info.dli_saddr)));
  } else {
    std::snprintf(buf, sizeof buf, "%s+0x%zx", module,
                  static_cast<size_t>(pc - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  }
  return buf;
}

std::string CallSites::DescribeLocked(const Site& s) const {
  std::string out;
  for (void* f : s.frames) {
    if (f == nullptr) break;
    if (!out.empty()) out += " < ";
    out += DescribeFrame(f);
  }
  return out;
}

std::string CallSites::Describe(uint64_t site) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sites_.find(site);
  return it == sites_.end() ? "" : DescribeLocked(it->second);
}

std::vector<CallSiteStats> CallSites::Top(size_t n) {
  std::vector<CallSiteStats> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, s] : sites_) {
      out.push_back(s.stats);
      out.back().where = DescribeLocked(s);
    }
  }
  std::sort(out.begin(), out.end(), [](const CallSiteStats& a, const CallSiteStats& b) {
    return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.total_count > b.total_count;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

}  // namespace vgpu
