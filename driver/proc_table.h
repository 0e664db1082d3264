// The cuGetProcAddress table: one entry per (base name, ABI version, variant),
// generated from the toolkit headers by driver/tools/gen_proc_table.py into
// proc_table.inc, and the lookup rules of the real driver. Header-only so that
// unit tests can check the rules on the generated table without the sim.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vgpu::driver {

enum ProcVariant : uint8_t { kProcNormal = 0, kProcPtds = 1, kProcPtsz = 2 };

struct ProcEntry {
  const char* name;    // base name cudart asks for, e.g. "cuMemAlloc"
  int version;         // ABI version that introduced this entry, e.g. 3020
  uint8_t variant;     // ProcVariant
  const char* symbol;  // exported symbol, e.g. "cuMemAlloc_v2"
  // The sim's implementation, or the exported NOT_SUPPORTED stub that stands
  // for an entry point it lacks (nullptr for those in a test's copy).
  void* fn;
};

struct ProcLookup {
  const ProcEntry* entry;  // nullptr unless status is CU_GET_PROC_ADDRESS_SUCCESS
  CUdriverProcAddressQueryResult status;
};

// Finds the entry the driver returns for (name, version): the newest ABI
// version <= `version`. With `per_thread` a per-thread (_ptds/_ptsz) entry wins
// over a normal one of the same or an older version, so a newer ABI of the
// normal function is never traded for an older per-thread one. A function
// without any per-thread entry answers its normal one, as documented; one
// whose per-thread entries are all newer than `version` is
// VERSION_NOT_SUFFICIENT (driver 580: cuMemcpyHtoD@3020 with the per-thread
// flag; the documentation suggests the legacy entry). `table` must be
// sorted by (name, version, variant). No allocation, no locks.
inline ProcLookup LookupProc(const ProcEntry* table, size_t size, const char* name, int version,
                             bool per_thread) {
  const ProcEntry* end = table + size;
  const ProcEntry* first = std::lower_bound(
      table, end, name,
      [](const ProcEntry& e, const char* n) { return std::strcmp(e.name, n) < 0; });
  if (first == end || std::strcmp(first->name, name) != 0) {
    return {nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND};
  }
  const ProcEntry* best = nullptr;
  bool has_per_thread = false, per_thread_in_range = false;
  for (const ProcEntry* e = first; e != end && std::strcmp(e->name, name) == 0; ++e) {
    has_per_thread |= e->variant != kProcNormal;
    if (e->version > version) continue;  // versions ascend within a name
    if (e->variant != kProcNormal && !per_thread) continue;
    per_thread_in_range |= e->variant != kProcNormal;
    // Later entries have a newer or equal version; at equal version the
    // per-thread variant sorts after the normal one and so wins.
    best = e;
  }
  if (per_thread && has_per_thread && !per_thread_in_range) best = nullptr;
  if (best == nullptr) return {nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT};
  return {best, CU_GET_PROC_ADDRESS_SUCCESS};
}

}  // namespace vgpu::driver
