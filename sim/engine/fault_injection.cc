#include "sim/engine/fault_injection.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace vgpu::sim {
namespace {

struct Fault {
  std::string name;
  uint64_t nth;
  CUresult code;
  std::atomic<uint64_t> calls{0};
};

// Written once before any concurrent use (from the first ApiEnter).
std::vector<Fault*>* g_faults = nullptr;
std::atomic<bool> g_configured{false};

}  // namespace

bool ConfigureFaults(const std::string& spec, std::string* error) {
  auto* faults = new std::vector<Fault*>();
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    auto a = item.find(':');
    auto b = item.rfind(':');
    char* end = nullptr;
    unsigned long long nth = 0, code = 0;
    bool ok = a != std::string::npos && b != a && a > 0;
    if (ok) {
      nth = std::strtoull(item.c_str() + a + 1, &end, 10);
      ok = end == item.c_str() + b && nth > 0;
    }
    if (ok) {
      code = std::strtoull(item.c_str() + b + 1, &end, 10);
      ok = *end == '\0' && b + 1 < item.size() && code > 0 && code < 100000;
    }
    if (!ok) {
      *error = "VGPU_SIM_FAULTS item '" + item + "' is malformed: expected name:N:code, e.g. " +
               "cuMemAlloc_v2:3:2";
      return false;
    }
    auto* f = new Fault{item.substr(0, a), nth, static_cast<CUresult>(code)};
    faults->push_back(f);
  }
  g_faults = faults;
  g_configured.store(!faults->empty(), std::memory_order_release);
  return true;
}

bool FaultsConfigured() { return g_configured.load(std::memory_order_acquire); }

// Every item of the name counts every call, so that "f:1:2,f:2:2" fails the
// first two calls (an early return left the second item a call behind).
CUresult InjectedFault(const char* name) {
  CUresult r = CUDA_SUCCESS;
  for (Fault* f : *g_faults) {
    if (f->name == name && f->calls.fetch_add(1) + 1 == f->nth && r == CUDA_SUCCESS) r = f->code;
  }
  return r;
}

}  // namespace vgpu::sim
