// The control agent inside libvgpu: serves vgpuctl's info, suspend, resume,
// checkpoint and restore (docs/control-protocol.md) with the residency
// operations (intercept/residency.h), and set (intercept/agent_set.h). Started lazily after cuInit
// succeeds; a failed start is logged and never fails the application.
#pragma once

#include <memory>

#include "ctl/control/agent_server.h"

namespace vgpu {

// The Handler of libvgpu's agent (the Runtime owns it and starts the agent).
std::unique_ptr<ctl::Handler> MakeAgentHandler();

}  // namespace vgpu
