#include "sim/engine/function_attributes.h"

#include "sim/engine/module_registry.h"

namespace vgpu::sim {
namespace {

// User __constant__ memory of the kernel's module.
int ConstantBytes(const KernelHandle* h) {
  const Program* p = h->module ? h->module->program.get() : nullptr;
  if (p == nullptr && h->library) p = h->library->program.get();
  uint64_t total = 0;
  if (p != nullptr) {
    for (const GlobalInfo& g : p->globals) total += g.is_constant ? g.size : 0;
  }
  return static_cast<int>(total);
}

bool HasCompileTimeCluster(const KernelInfo& k) {
  return k.required_cluster[0] || k.required_cluster[1] || k.required_cluster[2];
}

}  // namespace

uint32_t MaxDynamicShared(KernelHandle* h) {
  const int32_t set = h->attributes().max_dynamic_shared.load(std::memory_order_relaxed);
  if (set >= 0) return static_cast<uint32_t>(set);
  const uint32_t fixed = h->kernel->info.static_shared_bytes;
  return fixed < kSharedPerBlock ? kSharedPerBlock - fixed : 0;
}

void RequiredClusterDims(KernelHandle* h, uint32_t out[3]) {
  const KernelInfo& k = h->kernel->info;
  for (int d = 0; d < 3; ++d) {
    out[d] =
        HasCompileTimeCluster(k) ? k.required_cluster[d] : h->attributes().cluster_dims[d].load();
  }
}

CUresult GetFunctionAttribute(KernelHandle* h, CUfunction_attribute attrib, int* value) {
  const ProgramKernel& k = *h->kernel;
  KernelAttributes& a = h->attributes();
  uint32_t cluster[3];
  RequiredClusterDims(h, cluster);
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = static_cast<int>(k.max_threads_per_block);
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *value = static_cast<int>(k.info.static_shared_bytes);
      break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
      *value = ConstantBytes(h);
      break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *value = static_cast<int>(k.info.local_bytes);
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = k.info.num_regs;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      *value = k.ptx_version;
      break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *value = k.binary_version;
      break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
      *value = 0;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = static_cast<int>(MaxDynamicShared(h));
      break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *value = a.carveout.load();
      break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
      *value = HasCompileTimeCluster(k.info) ? 1 : 0;
      break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      *value = static_cast<int>(cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH]);
      break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      *value = a.non_portable_cluster.load();
      break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      *value = a.cluster_policy.load();
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult SetFunctionAttribute(KernelHandle* h, CUfunction_attribute attrib, int value) {
  KernelAttributes& a = h->attributes();
  const KernelInfo& k = h->kernel->info;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 ||
          static_cast<uint64_t>(value) + k.static_shared_bytes > kSharedPerBlockOptin) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      a.max_dynamic_shared.store(value);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      a.carveout.store(value);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      if (HasCompileTimeCluster(k)) return CUDA_ERROR_NOT_PERMITTED;
      if (value < 0 || value > 16) return CUDA_ERROR_INVALID_VALUE;
      a.cluster_dims[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH].store(
          static_cast<uint32_t>(value));
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (value != 0 && value != 1) return CUDA_ERROR_INVALID_VALUE;
      a.non_portable_cluster.store(value);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
          value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      a.cluster_policy.store(value);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // read-only or unknown
  }
}

}  // namespace vgpu::sim
