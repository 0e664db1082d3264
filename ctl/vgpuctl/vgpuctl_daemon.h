// vgpuctl's commands that read vgpud's view (docs/vgpud.md): ps when vgpud
// runs, top (a live view refreshed every second) and events (its recent
// decisions).
#pragma once

#include <string>
#include <vector>

#include "ctl/vgpuctl/vgpuctl_cli.h"

namespace vgpu::ctl::cli {

// ps through vgpud: true (with *rc set) when vgpud answered; false when none
// runs, and ps asks the agents itself.
bool DaemonPs(const CommonOptions& o, int* rc);
int Top(const TopCommand& o);
int Events(const CommonOptions& o);
// vgpuctl drain|undrain DEVICE (through vgpud).
int Drain(const DrainCommand& o, bool on);

}  // namespace vgpu::ctl::cli
