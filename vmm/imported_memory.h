// Another process's device memory mapped into this one (CUDA IPC of
// VMM-served memory, docs/vmm.md "CUDA IPC"): a chunk received as a POSIX
// file descriptor is imported (cuMemImportFromShareableHandle), mapped at a
// fresh VA range and made accessible to the opening context's device. Opened
// again by the same context, the same mapping is returned and counted, as
// cuIpcOpenMemHandle does; the last close unmaps it. Nothing here is charged
// to the quota: the memory is the exporter's.
//
// Every driver call goes through the driver table given (libvgpu: the real
// driver; tests: the simulated one). Thread-safe.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "driver/real_driver.h"

namespace vgpu::vmm {

// What names one exported allocation across processes.
struct ImportKey {
  int64_t exporter_pid = 0;
  uint64_t buffer_id = 0;
  CUcontext ctx = nullptr;  // the opening context
  auto operator<=>(const ImportKey&) const = default;
};

class ImportedMemory {
 public:
  explicit ImportedMemory(const driver::RealCuda& cuda) : cuda_(cuda) {}

  // The pointer of an open import of `key`, its count raised; 0 if none.
  CUdeviceptr Reopen(const ImportKey& key);
  // Imports `fd` (a chunk of `chunk_size` bytes; the caller keeps and closes
  // fd), maps it readable and writable by `device`, and returns the address
  // of `offset` in it.
  CUresult Open(const ImportKey& key, int fd, size_t chunk_size, size_t offset, int device,
                CUdeviceptr* out);
  // CUDA_ERROR_INVALID_VALUE if `ptr` is not one Open or Reopen returned.
  // *last: the mapping is gone (the exporter may be told).
  CUresult Close(CUdeviceptr ptr, ImportKey* key, bool* last);
  // Unmaps everything `ctx` opened (the context is gone); their keys.
  std::set<ImportKey> CloseContext(CUcontext ctx);
  // The processes whose memory is mapped here.
  std::set<int64_t> Exporters() const;

 private:
  struct Mapping {
    ImportKey key;
    CUdeviceptr va = 0;  // of the chunk
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    int refs = 0;
  };
  void UnmapLocked(const Mapping& m);

  const driver::RealCuda& cuda_;
  mutable std::mutex mu_;
  std::map<CUdeviceptr, Mapping> by_ptr_;  // the pointer handed out -> mapping
};

}  // namespace vgpu::vmm
