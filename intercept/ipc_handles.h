// CUDA IPC of VMM-served memory (docs/vmm.md "CUDA IPC"). Under VGPU_VMM a
// cuMemAlloc pointer is a mapping of cuMemCreate memory, for which a driver
// refuses legacy IPC handles; libvgpu makes its own 64-byte handle instead
// (the exporter's pid, the allocation's base, size and buffer id). The
// importer's cuIpcOpenMemHandle asks the exporter's agent ("ipc_export") for
// the allocation's chunk, which arrives as a POSIX file descriptor
// (SCM_RIGHTS) and is imported and mapped (vmm::ImportedMemory); the last
// cuIpcCloseMemHandle tells the exporter ("ipc_close"). Handles of memory
// the driver serves pass through unchanged.
#pragma once

#include <cuda.h>

#include "ctl/control/protocol.h"

namespace vgpu {

// The agent's side of the exchange.
ctl::Response ServeIpcExport(const ctl::Request& request);
ctl::Response ServeIpcClose(const ctl::Request& request);

// A context is gone: what it opened is unmapped and its exporters told.
void CloseIpcImportsOf(CUcontext ctx);

}  // namespace vgpu
