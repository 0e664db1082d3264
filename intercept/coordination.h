// libvgpu's side of vgpud (docs/vgpud.md): an allocation that does not fit in
// the device's free physical memory asks vgpud to make room (when it runs)
// instead of failing; a job vgpud suspended remembers it, and resumes by
// itself once no coordinator has answered for the grace period and its memory
// fits, so that no job stays suspended for ever.
#pragma once

#include <cstdint>

namespace vgpu::coordination {

// An allocation of `bytes` on physical device `device` failed for lack of
// device memory (not quota). Asks vgpud, outside the quiesce gate, and
// returns true when the allocation should be retried; false without vgpud,
// or when vgpud says it cannot fit.
bool AskForRoom(int device, uint64_t bytes);

// The agent's part: a suspend or checkpoint asked by vgpud (args "by":
// "vgpud") succeeded / the job is running again.
void NoteParkedByCoordinator(int64_t grace_ms);
void NoteUnparked();
bool ParkedByCoordinator();

// Starts (once) the watchdog that resumes a job parked by a vgpud that has
// not come back within the grace period.
void StartWatchdog();

}  // namespace vgpu::coordination
