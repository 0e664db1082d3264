// Occupancy: how many blocks of a kernel fit on one SM, from the kernel's
// attributes (registers, static shared memory, its thread limit) and the
// SM's limits (those cuDeviceGetAttribute reports: 2048 threads, 32 blocks,
// 64 Ki registers, 228 KiB shared memory of which 1 KiB is reserved per
// block), with the allocation granularities of sm_90 (registers per warp in
// units of 256, warps whole). Frameworks size their grids with these answers.
#include <algorithm>

#include "sim/api_common.h"
#include "sim/context.h"
#include "sim/function_attributes.h"
#include "sim/kernel_handles.h"
#include "sim/sim_state.h"

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
