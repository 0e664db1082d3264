// Hooks of legacy CUDA IPC (intercept/ipc_handles.h).
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "ctl/control/client.h"
#include "driver/real_driver.h"
#include "intercept/hook_body.h"
#include "intercept/hooks.h"
#include "intercept/ipc_handles.h"
#include "intercept/runtime.h"

namespace vgpu {
namespace {

// The 64 bytes of a libvgpu handle. A driver's handle never starts with the
// magic (its first bytes are a non-zero CUDA-internal header of another form);
// anything else is the driver's and passes through.
struct Wire {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved0;
  int64_t pid;  // the exporter, in the exporter's pid namespace (= ours: same node, same container)
  uint64_t base;
  uint64_t size;
  uint64_t buffer_id;
  uint8_t reserved[24];
};
static_assert(sizeof(Wire) == CU_IPC_HANDLE_SIZE);
constexpr uint32_t kMagic = 0x49475056;  // "VPGI"
constexpr uint16_t kVersion = 1;

bool Decode(const CUipcMemHandle& h, Wire* w) {
  std::memcpy(w, h.reserved, sizeof *w);
  return w->magic == kMagic && w->version == kVersion;
}

// How long an importer waits for the exporter's agent.
constexpr int kAgentTimeoutMs = 10000;

ctl::ClientOptions AgentOptions() {
  ctl::ClientOptions o;
  o.run_dir = Runtime::Get().config().run_dir;
  o.timeout_ms = kAgentTimeoutMs;
  o.deadline_ms = kAgentTimeoutMs;
  return o;
}

// Tells the exporter this process no longer maps its buffer (best effort: an
// exporter that cannot be told forgets us once we exit).
void TellClosed(const vmm::ImportKey& key) {
  ctl::Request req;
  req.cmd = "ipc_close";
  req.args = {{"buffer_id", key.buffer_id}};
  ctl::Response resp;
  ctl::ClientOptions o = AgentOptions();
  o.timeout_ms = o.deadline_ms = 2000;
  ctl::Status st = ctl::Call(static_cast<pid_t>(key.exporter_pid), req, {}, &resp, o);
  if (!st.ok())
    VGPU_LOG(kInfo, "ipc: cannot tell pid {} of a close: {}", key.exporter_pid, st.message.c_str());
}

CUresult Export(CUipcMemHandle* handle, CUdeviceptr dptr) {
  vmm::AllocationInfo info;
  if (handle == nullptr || !Runtime::Get().vmm().Find(dptr, &info)) {
    return REAL_CALL(cuIpcGetMemHandle, handle, dptr);
  }
  // As the driver answers for memory that is not a cuMemAlloc base.
  if (info.va != dptr || info.pool != nullptr) return CUDA_ERROR_INVALID_VALUE;
  Wire w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.pid = getpid();
  w.base = info.va;
  w.size = info.size;
  w.buffer_id = info.buffer_id;
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &w, sizeof w);
  return CUDA_SUCCESS;
}

// Fetches the chunk from the exporter's agent and maps it.
CUresult Import(const Wire& w, const vmm::ImportKey& key, int device, CUdeviceptr* out) {
  ctl::Request req;
  req.cmd = "ipc_export";
  req.args = {{"base", w.base}, {"buffer_id", w.buffer_id}};
  ctl::Response resp;
  ctl::Status st = ctl::Call(static_cast<pid_t>(w.pid), req, {}, &resp, AgentOptions());
  if (!st.ok() || !resp.ok || resp.fds.size() != 1) {
    VGPU_LOG(kWarn, "ipc: pid {} did not share its allocation: {}", w.pid,
             (!st.ok() ? st.message : resp.error).c_str());
    for (int fd : resp.fds) close(fd);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const int fd = resp.fds[0];
  const size_t chunk = resp.result.value("chunk_size", uint64_t{0});
  const size_t offset = resp.result.value("offset", uint64_t{0});
  CUresult r = Runtime::Get().imported().Open(key, fd, chunk, offset, device, out);
  close(fd);
  if (r != CUDA_SUCCESS) TellClosed(key);
  return r;
}

CUresult Open(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned flags) {
  Wire w;
  if (!Decode(handle, &w)) return REAL_CALL(cuIpcOpenMemHandle_v2, pdptr, handle, flags);
  if (pdptr == nullptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (REAL_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || ctx == nullptr) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (CUresult r = REAL_CALL(cuCtxGetDevice, &device); r != CUDA_SUCCESS) return r;
  // cuda.h: handles are opened by other processes.
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  const vmm::ImportKey key{w.pid, w.buffer_id, ctx};
  if (CUdeviceptr p = Runtime::Get().imported().Reopen(key); p != 0) {
    *pdptr = p;
    return CUDA_SUCCESS;
  }
  return Import(w, key, device, pdptr);
}

}  // namespace

namespace {

// An unsigned integer argument; false if missing or of another type.
bool U64Arg(const ctl::Request& req, const char* name, uint64_t* out) {
  auto it = req.args.find(name);
  if (it == req.args.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}

}  // namespace

ctl::Response ServeIpcExport(const ctl::Request& req) {
  uint64_t base = 0, buffer_id = 0;
  if (!U64Arg(req, "base", &base) || !U64Arg(req, "buffer_id", &buffer_id)) {
    return ctl::Response::Error(ctl::ErrorCode::kInval,
                                "ipc_export needs unsigned base and buffer_id");
  }
  Runtime& rt = Runtime::Get();
  // Noted before the chunk leaves: from here on this process refuses to be
  // suspended, so the importer never maps memory that a suspend released.
  rt.ipc_sharing().NoteImporter(buffer_id, req.peer_pid);
  vmm::ExportedChunk c;
  CUresult r = rt.vmm().ExportAllocation(base, &c);
  if (r == CUDA_SUCCESS && c.buffer_id != buffer_id) {
    close(c.fd);
    r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r != CUDA_SUCCESS) {
    rt.ipc_sharing().ForgetImporter(buffer_id, req.peer_pid);
    return ctl::Response::Error(ctl::ErrorCode::kNoEnt,
                                "no live allocation of this handle (freed, or the process is "
                                "suspended): CUresult " +
                                    std::to_string(r));
  }
  ctl::Response resp =
      ctl::Response::Ok({{"chunk_size", c.chunk_size}, {"offset", c.offset}, {"size", c.size}});
  resp.fds.push_back(c.fd);
  return resp;
}

ctl::Response ServeIpcClose(const ctl::Request& req) {
  uint64_t buffer_id = 0;
  if (!U64Arg(req, "buffer_id", &buffer_id)) {
    return ctl::Response::Error(ctl::ErrorCode::kInval, "ipc_close needs an unsigned buffer_id");
  }
  Runtime::Get().ipc_sharing().ForgetImporter(buffer_id, req.peer_pid);
  return ctl::Response::Ok();
}

void CloseIpcImportsOf(CUcontext ctx) {
  for (const vmm::ImportKey& key : Runtime::Get().imported().CloseContext(ctx)) TellClosed(key);
}

}  // namespace vgpu

VGPU_HOOK(cuIpcGetMemHandle)
CUresult CUDAAPI vgpu_hook_cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  return vgpu::WhenReadyGated([&] { return vgpu::Export(pHandle, dptr); });
}

VGPU_HOOK(cuIpcOpenMemHandle_v2)
CUresult CUDAAPI vgpu_hook_cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                 unsigned int Flags) {
  return vgpu::WhenReadyGated([&] { return vgpu::Open(pdptr, handle, Flags); });
}

// The CUDA 4.1 symbol: the same arguments.
VGPU_HOOK(cuIpcOpenMemHandle)
CUresult CUDAAPI vgpu_hook_cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                              unsigned int Flags) {
  return vgpu::WhenReadyGated([&] {
    vgpu::Wire w;
    if (!vgpu::Decode(handle, &w)) return REAL_CALL(cuIpcOpenMemHandle, pdptr, handle, Flags);
    return vgpu::Open(pdptr, handle, Flags);
  });
}

VGPU_HOOK(cuIpcCloseMemHandle) CUresult CUDAAPI vgpu_hook_cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    vgpu::vmm::ImportKey key;
    bool last = false;
    if (vgpu::Runtime::Get().imported().Close(dptr, &key, &last) != CUDA_SUCCESS) {
      return REAL_CALL(cuIpcCloseMemHandle, dptr);
    }
    if (last) vgpu::TellClosed(key);
    return CUDA_SUCCESS;
  });
}
