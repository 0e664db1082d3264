#include "vmm/imported_memory.h"

namespace vgpu::vmm {

CUdeviceptr ImportedMemory::Reopen(const ImportKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ptr, m] : by_ptr_) {
    if (m.key == key) {
      ++m.refs;
      return ptr;
    }
  }
  return 0;
}

CUresult ImportedMemory::Open(const ImportKey& key, int fd, size_t chunk_size, size_t offset,
                              int device, CUdeviceptr* out) {
  if (offset >= chunk_size) return CUDA_ERROR_INVALID_VALUE;
  Mapping m;
  m.key = key;
  m.size = chunk_size;
  m.refs = 1;
  CUresult r = TABLE_CALL(cuda_, cuMemImportFromShareableHandle, &m.handle,
                          reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) return r;
  r = TABLE_CALL(cuda_, cuMemAddressReserve, &m.va, chunk_size, 0, 0, 0);
  if (r == CUDA_SUCCESS) {
    r = TABLE_CALL(cuda_, cuMemMap, m.va, chunk_size, 0, m.handle, 0);
    if (r == CUDA_SUCCESS) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      r = TABLE_CALL(cuda_, cuMemSetAccess, m.va, chunk_size, &access, 1);
      if (r != CUDA_SUCCESS) TABLE_CALL(cuda_, cuMemUnmap, m.va, chunk_size);
    }
    if (r != CUDA_SUCCESS) TABLE_CALL(cuda_, cuMemAddressFree, m.va, chunk_size);
  }
  if (r != CUDA_SUCCESS) {
    TABLE_CALL(cuda_, cuMemRelease, m.handle);
    return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  *out = m.va + offset;
  by_ptr_[*out] = m;
  return CUDA_SUCCESS;
}

void ImportedMemory::UnmapLocked(const Mapping& m) {
  TABLE_CALL(cuda_, cuMemUnmap, m.va, m.size);
  TABLE_CALL(cuda_, cuMemAddressFree, m.va, m.size);
  TABLE_CALL(cuda_, cuMemRelease, m.handle);
}

CUresult ImportedMemory::Close(CUdeviceptr ptr, ImportKey* key, bool* last) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_ptr_.find(ptr);
  if (it == by_ptr_.end()) return CUDA_ERROR_INVALID_VALUE;
  *key = it->second.key;
  *last = --it->second.refs == 0;
  if (*last) {
    UnmapLocked(it->second);
    by_ptr_.erase(it);
  }
  return CUDA_SUCCESS;
}

std::set<ImportKey> ImportedMemory::CloseContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<ImportKey> closed;
  for (auto it = by_ptr_.begin(); it != by_ptr_.end();) {
    if (it->second.key.ctx != ctx) {
      ++it;
      continue;
    }
    closed.insert(it->second.key);
    UnmapLocked(it->second);
    it = by_ptr_.erase(it);
  }
  return closed;
}

std::set<int64_t> ImportedMemory::Exporters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int64_t> out;
  for (const auto& [ptr, m] : by_ptr_) out.insert(m.key.exporter_pid);
  return out;
}

}  // namespace vgpu::vmm
