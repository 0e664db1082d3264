// Context-wide event record and wait, shared by cuCtxRecordEvent/WaitEvent
// and the green-context forms (cuGreenCtxRecordEvent/WaitEvent).
#pragma once

#include <cuda.h>

#include "sim/engine/context.h"
#include "sim/engine/event.h"

namespace vgpu::sim {

// Records ev once every stream of ctx has finished the work it holds now.
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while one of them is capturing.
CUresult RecordContextEvent(Context* ctx, Event* ev);
// Makes every stream ctx has now wait (on the device) for ev's latest record.
CUresult WaitContextEvent(Context* ctx, Event* ev);

}  // namespace vgpu::sim
