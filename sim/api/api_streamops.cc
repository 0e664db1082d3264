// Stream memory operations (cuStreamWaitValue*, cuStreamWriteValue*,
// cuStreamBatchMemOp), stream attributes and cuStreamGetDevice.
//
// A wait is an operation of the stream like any other: the stream's worker
// polls the 32- or 64-bit word until the condition holds, so the stream's later
// work (and anything waiting on it) waits too. A write stores the value when
// reached in stream order. The word may be device memory or page-locked host
// memory (cuMemHostAlloc / cuMemHostRegister, device pointer == host pointer);
// managed memory is refused as cuda.h documents.
#include <algorithm>
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/api/graph_api.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr unsigned kWaitCondMask = 0x3u;  // GEQ, EQ, AND, NOR

enum class Api { kV1, kV2 };

// The host address of the word at addr (size 4 or 8), or INVALID_VALUE.
CUresult ResolveWord(CUdeviceptr addr, unsigned size, uint8_t** out) {
  if (addr == 0 || addr % size != 0) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  if (LookupAllocation(addr, &info) && info.kind == AllocKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
  void* host = Translate(addr, size);
  if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = static_cast<uint8_t*>(host);
  return CUDA_SUCCESS;
}

// One validated memory operation, ready to be queued.
struct MemOp {
  OpKind kind = OpKind::kNop;  // kNop: a barrier or a flush (nothing to do here)
  uint8_t* word = nullptr;
  uint8_t size = 4;
  uint64_t value = 0;
  unsigned flags = 0;
};

CUresult PrepareWait(CUdeviceptr addr, uint64_t value, unsigned flags, unsigned size, MemOp* out) {
  if ((flags & ~(kWaitCondMask | static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH))) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = ResolveWord(addr, size, &out->word); r != CUDA_SUCCESS) return r;
  out->kind = OpKind::kWaitValue;
  out->size = static_cast<uint8_t>(size);
  out->value = size == 4 ? static_cast<uint32_t>(value) : value;
  out->flags = flags;  // FLUSH: every write is visible at once here, nothing to flush
  return CUDA_SUCCESS;
}

CUresult PrepareWrite(CUdeviceptr addr, uint64_t value, unsigned flags, unsigned size, MemOp* out) {
  // NO_MEMORY_BARRIER only lets the write be reordered with earlier ones; the
  // sim's writes are in order either way (cuda.h says the v2 API does not
  // support the flag; it is accepted and has no effect).
  if ((flags & ~static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = ResolveWord(addr, size, &out->word); r != CUDA_SUCCESS) return r;
  out->kind = OpKind::kWriteValue;
  out->size = static_cast<uint8_t>(size);
  out->value = size == 4 ? static_cast<uint32_t>(value) : value;
  out->flags = flags;
  return CUDA_SUCCESS;
}

void Fill(const MemOp& m, Op* op) {
  op->kind = m.kind;
  op->dst = m.word;
  op->elem = m.size;
  op->value64 = m.value;
  op->mem_flags = m.flags;
}

void Enqueue(Stream* s, const MemOp& m) {
  Fill(m, s->Begin());
  s->Commit();
}

CUresult Single(CUstream h, bool ptsz, CUresult prepared, const MemOp& m) {
  if (prepared != CUDA_SUCCESS) return prepared;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  Enqueue(s, m);
  return CUDA_SUCCESS;
}

CUresult WaitValue(CUstream h, CUdeviceptr addr, uint64_t value, unsigned flags, unsigned size, bool ptsz) {
  MemOp m;
  return Single(h, ptsz, PrepareWait(addr, value, flags, size, &m), m);
}

CUresult WriteValue(CUstream h, CUdeviceptr addr, uint64_t value, unsigned flags, unsigned size, bool ptsz) {
  MemOp m;
  return Single(h, ptsz, PrepareWrite(addr, value, flags, size, &m), m);
}

// Validates a whole batch (nothing is queued unless every operation is valid).
CUresult PrepareBatch(unsigned count, const CUstreamBatchMemOpParams* params, unsigned flags,
                      Api api, std::vector<MemOp>* ops) {
  if (flags != 0 || count >= 256 || (count > 0 && params == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  ops->assign(count, MemOp{});
  for (unsigned i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& p = params[i];
    MemOp& m = (*ops)[i];
    CUresult r = CUDA_SUCCESS;
    switch (RawEnum(p.operation)) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        r = PrepareWait(p.waitValue.address, p.waitValue.value, p.waitValue.flags, 4, &m);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        r = PrepareWait(p.waitValue.address, p.waitValue.value64, p.waitValue.flags, 8, &m);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        r = PrepareWrite(p.writeValue.address, p.writeValue.value, p.writeValue.flags, 4, &m);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        r = PrepareWrite(p.writeValue.address, p.writeValue.value64, p.writeValue.flags, 8, &m);
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        if (p.flushRemoteWrites.flags != 0) r = CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_STREAM_MEM_OP_BARRIER:  // "Only supported in the _v2 API"
        if (api == Api::kV1 || (p.memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
                                p.memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU)) {
          r = CUDA_ERROR_INVALID_VALUE;
        }
        break;
      default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult Batch(CUstream h, unsigned count, const CUstreamBatchMemOpParams* params, unsigned flags,
               bool ptsz, Api api) {
  std::vector<MemOp> ops;
  if (CUresult r = PrepareBatch(count, params, flags, api, &ops); r != CUDA_SUCCESS) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  // Barriers and flushes order nothing more than the stream already does.
  for (const MemOp& m : ops) {
    if (m.kind != OpKind::kNop) Enqueue(s, m);
  }
  return CUDA_SUCCESS;
}

// ---- stream attributes ----

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;
// CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE (an H100's).
constexpr size_t kMaxAccessPolicyWindow = 134213632;

CUresult GetAttribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue* out, bool ptsz) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(s->attr_mu);
  switch (attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      out->accessPolicyWindow = s->attrs.window;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      out->syncPolicy = s->attrs.sync_policy;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      out->priority = s->priority();
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      out->memSyncDomainMap = s->attrs.domain_map;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      out->memSyncDomain = s->attrs.domain;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      out->nvlinkUtilCentricScheduling = s->attrs.nvlink_centric;
      return CUDA_SUCCESS;
    default:  // launch- or graph-node-only attributes
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult SetAttribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue* v, bool ptsz) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(s->attr_mu);
  switch (attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow& w = v->accessPolicyWindow;
      if (w.num_bytes > kMaxAccessPolicyWindow || !(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) ||
          w.hitProp < CU_ACCESS_PROPERTY_NORMAL || w.hitProp > CU_ACCESS_PROPERTY_PERSISTING ||
          (w.missProp != CU_ACCESS_PROPERTY_NORMAL && w.missProp != CU_ACCESS_PROPERTY_STREAMING)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      s->attrs.window = w;
      return CUDA_SUCCESS;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      if (RawEnum(v->syncPolicy) < CU_SYNC_POLICY_AUTO ||
          RawEnum(v->syncPolicy) > CU_SYNC_POLICY_BLOCKING_SYNC) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      s->attrs.sync_policy = v->syncPolicy;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      // Clamped to the device's range, as cuStreamCreateWithPriority does.
      s->set_priority(std::clamp(v->priority, kGreatestPriority, kLeastPriority));
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      // CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT is 4 on an H100.
      if (v->memSyncDomainMap.default_ >= 4 || v->memSyncDomainMap.remote >= 4) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      s->attrs.domain_map = v->memSyncDomainMap;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      if (v->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT &&
          v->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      s->attrs.domain = v->memSyncDomain;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      if (v->nvlinkUtilCentricScheduling > 1) return CUDA_ERROR_INVALID_VALUE;
      s->attrs.nvlink_centric = v->nvlinkUtilCentricScheduling;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CopyAttributes(CUstream dst, CUstream src, bool ptsz) {
  Stream* d = nullptr;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(dst, ptsz, &d); r != CUDA_SUCCESS) return r;
  if (CUresult r = ResolveStream(src, ptsz, &s); r != CUDA_SUCCESS) return r;
  if (d->ctx() != s->ctx()) return CUDA_ERROR_INVALID_VALUE;  // "must have the same context"
  if (d == s) return CUDA_SUCCESS;
  StreamAttributes a;
  {
    std::lock_guard<std::mutex> lock(s->attr_mu);
    a = s->attrs;
  }
  std::lock_guard<std::mutex> lock(d->attr_mu);
  d->attrs = a;
  return CUDA_SUCCESS;
}

CUresult GetDevice(CUstream h, CUdevice* device, bool ptsz) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  *device = s->ctx()->device;
  return CUDA_SUCCESS;
}

}  // namespace

namespace vgpu::sim {

CUresult MakeBatchOps(const CUDA_BATCH_MEM_OP_NODE_PARAMS& p, std::vector<Op>* ops) {
  std::vector<MemOp> prepared;
  // A node's operations follow the _v2 API (barriers allowed).
  if (CUresult r = PrepareBatch(p.count, p.paramArray, p.flags, Api::kV2, &prepared);
      r != CUDA_SUCCESS) {
    return r;
  }
  ops->clear();
  ops->resize(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) Fill(prepared[i], &(*ops)[i]);
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

// ---- stream memory operations: v2 (CUDA 11.7+), per-thread and v1 names ----

SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue32_v2");
  return WaitValue(stream, addr, value, flags, 4, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue32_v2_ptsz");
  return WaitValue(stream, addr, value, flags, 4, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue64_v2");
  return WaitValue(stream, addr, value, flags, 8, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue64_v2_ptsz");
  return WaitValue(stream, addr, value, flags, 8, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue32_v2");
  return WriteValue(stream, addr, value, flags, 4, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue32_v2_ptsz");
  return WriteValue(stream, addr, value, flags, 4, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue64_v2");
  return WriteValue(stream, addr, value, flags, 8, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue64_v2_ptsz");
  return WriteValue(stream, addr, value, flags, 8, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
  SIM_ENTER("cuStreamBatchMemOp_v2");
  return Batch(stream, count, paramArray, flags, false, Api::kV2);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
  SIM_ENTER("cuStreamBatchMemOp_v2_ptsz");
  return Batch(stream, count, paramArray, flags, true, Api::kV2);
}

// The v1 names (CUDA 8.0-11.6 ABI); cuda.h maps the unversioned names to _v2.
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamBatchMemOp
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue32");
  return WaitValue(stream, addr, value, flags, 4, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue32_ptsz");
  return WaitValue(stream, addr, value, flags, 4, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue64");
  return WaitValue(stream, addr, value, flags, 8, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitValue64_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWaitValue64_ptsz");
  return WaitValue(stream, addr, value, flags, 8, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue32");
  return WriteValue(stream, addr, value, flags, 4, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue32_ptsz");
  return WriteValue(stream, addr, value, flags, 4, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue64");
  return WriteValue(stream, addr, value, flags, 8, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWriteValue64_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  SIM_ENTER("cuStreamWriteValue64_ptsz");
  return WriteValue(stream, addr, value, flags, 8, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
  SIM_ENTER("cuStreamBatchMemOp");
  return Batch(stream, count, paramArray, flags, false, Api::kV1);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBatchMemOp_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
  SIM_ENTER("cuStreamBatchMemOp_ptsz");
  return Batch(stream, count, paramArray, flags, true, Api::kV1);
}

// ---- stream attributes and device ----

SIM_EXPORT CUresult CUDAAPI cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue* value_out) {
  SIM_ENTER("cuStreamGetAttribute");
  return GetAttribute(hStream, attr, value_out, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue* value_out) {
  SIM_ENTER("cuStreamGetAttribute_ptsz");
  return GetAttribute(hStream, attr, value_out, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue* value) {
  SIM_ENTER("cuStreamSetAttribute");
  return SetAttribute(hStream, attr, value, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue* value) {
  SIM_ENTER("cuStreamSetAttribute_ptsz");
  return SetAttribute(hStream, attr, value, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamCopyAttributes(CUstream dst, CUstream src) {
  SIM_ENTER("cuStreamCopyAttributes");
  return CopyAttributes(dst, src, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) {
  SIM_ENTER("cuStreamCopyAttributes_ptsz");
  return CopyAttributes(dst, src, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetDevice(CUstream hStream, CUdevice* device) {
  SIM_ENTER("cuStreamGetDevice");
  return GetDevice(hStream, device, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream hStream, CUdevice* device) {
  SIM_ENTER("cuStreamGetDevice_ptsz");
  return GetDevice(hStream, device, true);
}
