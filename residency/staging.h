// Host staging of checkpoint and restore (docs/vmm.md, "Residency states").
//
// Both directions go through pinned host memory (cuMemHostAlloc) and a
// dedicated stream per context, double-buffered, so that on a GPU the DMA of
// one frame overlaps the compression, checksumming or decompression of the
// next one instead of the CPU staging every byte through pageable memory:
//   checkpoint: cuMemcpyDtoHAsync straight into the image writer's frame
//               buffers (pinned through WriterOptions::frame_buffers); the
//               writer's threads compress and write them while the next
//               frame is copied.
//   restore:    each worker decodes a frame (checksum verified) into one of
//               its two pinned buffers and queues cuMemcpyHtoDAsync from it
//               while it decodes the next frame into the other.
// Pinned memory that cannot be had (no context, out of pinned memory) falls
// back to pageable memory: slower on a GPU, still correct. Every driver call
// goes through the driver table the engine was given (libvgpu: the real
// driver's; tests: the simulated driver linked in).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"
#include "driver/real_driver.h"
#include "vmm/vmm.h"

namespace vgpu::residency {

// The driver and the VMM manager the staging copies through.
struct StagingPorts {
  const driver::RealCuda* cuda = nullptr;
  vmm::Manager* vmm = nullptr;
};

// Pinned frame buffers for an image writer, allocated in `ctx`.
checkpoint::FrameBufferAllocator PinnedFrameBuffers(const StagingPorts& ports, CUcontext ctx);

// One stream (and two events) per context for the asynchronous copies of
// one operation. The destructor waits for every copy it queued, so a buffer
// it copies into is never freed under a DMA.
class CopyStreams {
 public:
  explicit CopyStreams(const StagingPorts& ports) : ports_(ports) {}
  ~CopyStreams();
  CopyStreams(const CopyStreams&) = delete;
  CopyStreams& operator=(const CopyStreams&) = delete;

  // Streams `a` from the device into the writer's open record (BeginRecord
  // done by the caller): frame k+1 is copied while frame k is committed.
  // Returns "" or what failed.
  std::string CopyOut(const vmm::AllocationInfo& a, checkpoint::ImageWriter* w);

 private:
  struct PerContext {
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    CUevent done[2] = {nullptr, nullptr};
  };
  CUresult For(CUcontext ctx, PerContext** out);
  StagingPorts ports_;
  std::vector<PerContext> contexts_;
};

// The frames of one record and where they go on the device.
struct RestoreTarget {
  size_t record = 0;  // index in the image
  vmm::AllocationInfo alloc;
};

// Decodes every frame of `targets` (checksums and sizes verified frame by
// frame) into pinned buffers and copies it to the device, with `threads`
// workers. Stops at the first failure and returns its message ("" if all
// went well); the device memory is then partly written. progress(done,
// total) in uncompressed bytes, serialized.
std::string RestoreFrames(const StagingPorts& ports, const checkpoint::ImageReader& reader,
                          const std::vector<RestoreTarget>& targets, int threads,
                          const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace vgpu::residency
