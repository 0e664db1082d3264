// Occupancy: how many blocks of a kernel fit on one SM, from the kernel's
// attributes (registers, static shared memory, its thread limit) and the
// SM's limits (those cuDeviceGetAttribute reports: 2048 threads, 32 blocks,
// 64 Ki registers, 228 KiB shared memory of which 1 KiB is reserved per
// block), with the allocation granularities of sm_90 (registers per warp in
// units of 256, warps whole). Frameworks size their grids with these answers.
#include <algorithm>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/function_attributes.h"
#include "sim/modules/kernel_handles.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr int kThreadsPerSm = 2048;
constexpr int kBlocksPerSm = 32;
constexpr int kRegistersPerSm = 65536;
constexpr int kSharedPerSm = 233472;
constexpr int kReservedSharedPerBlock = 1024;
constexpr int kWarp = 32;

int Attribute(KernelHandle* h, CUfunction_attribute a) {
  int v = 0;
  return GetFunctionAttribute(h, a, &v) == CUDA_SUCCESS ? v : 0;
}

// Blocks of `block_size` threads with `dynamic_shared` bytes that fit on one SM.
int BlocksPerSm(KernelHandle* h, int block_size, size_t dynamic_shared) {
  if (block_size <= 0 || block_size > Attribute(h, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) return 0;
  if (dynamic_shared > MaxDynamicShared(h)) return 0;
  const int warps = (block_size + kWarp - 1) / kWarp;
  int blocks = std::min(kBlocksPerSm, kThreadsPerSm / (warps * kWarp));
  const int regs = Attribute(h, CU_FUNC_ATTRIBUTE_NUM_REGS);
  if (regs > 0) {
    const int regs_per_warp = (regs * kWarp + 255) / 256 * 256;
    blocks = std::min(blocks, kRegistersPerSm / regs_per_warp / warps);
  }
  const size_t shared =
      static_cast<size_t>(Attribute(h, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)) + dynamic_shared +
      kReservedSharedPerBlock;
  blocks = std::min<int>(blocks, static_cast<int>(kSharedPerSm / shared));
  return std::max(blocks, 0);
}

CUresult MaxActiveBlocks(int* num_blocks, CUfunction func, int block_size, size_t dynamic_shared,
                         unsigned flags) {
  if (num_blocks == nullptr || (flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  HandleRef h(func);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  *num_blocks = BlocksPerSm(h.get(), block_size, dynamic_shared);
  return CUDA_SUCCESS;
}

// The block size (a multiple of the warp size, up to the limits) with the most
// resident threads per SM, and the grid that fills every SM with it.
CUresult PotentialBlockSize(int* min_grid, int* block_size, CUfunction func,
                            CUoccupancyB2DSize shared_of, size_t dynamic_shared, int limit,
                            unsigned flags) {
  if (min_grid == nullptr || block_size == nullptr ||
      (flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  HandleRef h(func);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  int max = Attribute(h.get(), CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (limit > 0) max = std::min(max, limit);
  int best_size = 0, best_blocks = 0, best_threads = 0;
  for (int size = max / kWarp * kWarp; size >= kWarp; size -= kWarp) {
    size_t shared = shared_of != nullptr ? shared_of(size) : dynamic_shared;
    int blocks = BlocksPerSm(h.get(), size, shared);
    if (blocks * size > best_threads) {
      best_threads = blocks * size;
      best_size = size;
      best_blocks = blocks;
    }
  }
  int sms = 1;
  if (Context* ctx = CurrentContextOrNull(); ctx != nullptr) {
    sms = State()->config.devices[static_cast<size_t>(ctx->device)].sm_count;
  }
  *block_size = best_size;
  *min_grid = best_blocks * std::max(sms, 1);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                                         int blockSize, size_t dynamicSMemSize) {
  SIM_ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return MaxActiveBlocks(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  SIM_ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  return MaxActiveBlocks(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, CUfunction func,
                                                             CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                             size_t dynamicSMemSize, int blockSizeLimit) {
  SIM_ENTER("cuOccupancyMaxPotentialBlockSize");
  return PotentialBlockSize(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                            blockSizeLimit, 0);
}

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
    size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags) {
  SIM_ENTER("cuOccupancyMaxPotentialBlockSizeWithFlags");
  return PotentialBlockSize(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                            blockSizeLimit, flags);
}

SIM_EXPORT CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, CUfunction func,
                                                                    int numBlocks, int blockSize) {
  SIM_ENTER("cuOccupancyAvailableDynamicSMemPerBlock");
  if (dynamicSmemSize == nullptr || numBlocks <= 0) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(func);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  if (BlocksPerSm(h.get(), blockSize, 0) < numBlocks) {
    *dynamicSmemSize = 0;
    return CUDA_SUCCESS;
  }
  const size_t per_block = kSharedPerSm / static_cast<size_t>(numBlocks);
  const size_t fixed =
      static_cast<size_t>(Attribute(h.get(), CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)) + kReservedSharedPerBlock;
  *dynamicSmemSize = std::min<size_t>(per_block > fixed ? per_block - fixed : 0, MaxDynamicShared(h.get()));
  return CUDA_SUCCESS;
}

// ---- Thread-block clusters ----
//
// A cluster's blocks run at once on the SMs of one GPC. The modelled H100 has
// its SMs in GPCs of 16 (132 SMs: 8 GPCs, 4 of them with 17). Cluster sizes up
// to 8 are portable; up to 16 for a kernel that allows non-portable sizes.

namespace {

constexpr int kSmsPerGpc = 16;
constexpr int kPortableClusterSize = 8;
constexpr int kMaxClusterSize = 16;

struct ClusterQuery {
  int sms = 132;
  int blocks_per_sm = 0;
  int max_size = kPortableClusterSize;  // the largest size the kernel may use
  int required = 0;                     // the kernel's required size, 0 if none
  int config_size = 0;                  // the config's cluster dimension, 0 if none
};

CUresult PrepareClusterQuery(CUfunction func, const CUlaunchConfig* config, ClusterQuery* q) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(func);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  q->sms = std::max(1, State()->config.devices[static_cast<size_t>(ctx->device)].sm_count);
  const uint64_t threads = uint64_t{config->blockDimX} * config->blockDimY * config->blockDimZ;
  if (threads == 0 || threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  q->blocks_per_sm = BlocksPerSm(h.get(), static_cast<int>(threads), config->sharedMemBytes);
  if (Attribute(h.get(), CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) != 0) q->max_size = kMaxClusterSize;
  const int rw = Attribute(h.get(), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
  if (rw > 0) {
    q->required = rw * std::max(1, Attribute(h.get(), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)) *
                  std::max(1, Attribute(h.get(), CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH));
  }
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& d = config->attrs[i].value.clusterDim;
      q->config_size = static_cast<int>(d.x * std::max(1u, d.y) * std::max(1u, d.z));
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func, const CUlaunchConfig* config) {
  SIM_ENTER("cuOccupancyMaxPotentialClusterSize");
  if (clusterSize == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClusterQuery q;
  if (CUresult r = PrepareClusterQuery(func, config, &q); r != CUDA_SUCCESS) return r;
  // The config's cluster dimensions are ignored; a required size is the answer.
  if (q.required > 0) {
    *clusterSize = q.required;
    return CUDA_SUCCESS;
  }
  *clusterSize = std::min(q.max_size, kSmsPerGpc * q.blocks_per_sm);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func, const CUlaunchConfig* config) {
  SIM_ENTER("cuOccupancyMaxActiveClusters");
  if (numClusters == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClusterQuery q;
  if (CUresult r = PrepareClusterQuery(func, config, &q); r != CUDA_SUCCESS) return r;
  // The size comes from the config or the kernel's requirement (they must agree).
  int size = q.config_size > 0 ? q.config_size : q.required;
  if (size <= 0 || (q.required > 0 && q.config_size > 0 && q.config_size != q.required)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (size > q.max_size) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  // Clusters per GPC, GPC by GPC (the SMs past 16 per GPC spread one each).
  const int gpcs = std::max(1, q.sms / kSmsPerGpc);
  int total = 0;
  for (int g = 0; g < gpcs; ++g) {
    const int sms = q.sms / gpcs + (g < q.sms % gpcs ? 1 : 0);
    total += sms * q.blocks_per_sm / size;
  }
  *numClusters = total;
  return CUDA_SUCCESS;
}
