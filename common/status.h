// The one error type of vgpu: a code and a one-line message. Every module
// returns it instead of throwing (the checkpoint library, the residency
// engine, the control protocol and its client); the driver's CUresult maps
// onto it in one place (driver/cu_status.h). The codes carry errno names, which
// is also how they travel on the control socket (docs/control-protocol.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace vgpu {

enum class ErrorCode : uint8_t {
  kOk,
  kPerm,      // EPERM: peer not allowed, or the operation is not permitted
  kInval,     // EINVAL: malformed input (request, argument, image), wrong values
  kBusy,      // EBUSY: wrong state (already suspended) or another operation running
  kNoEnt,     // ENOENT: no such agent/process, image or directory
  kIo,        // EIO: the operation failed (copy, disk, driver), or an internal error
  kNoSys,     // ENOSYS: unknown command, or not supported here
  kProto,     // EPROTO: unsupported protocol version or unframed garbage
  kTooBig,    // E2BIG: request line longer than the protocol allows
  kTimedOut,  // ETIMEDOUT: the peer did not answer or send in time
  kExist,     // EEXIST: the target exists and may not be replaced (another job's image)
  // EUNTRUSTED: never sent by an agent; the client refused the run directory
  // or the process answering on the socket (not the target: spoofing).
  kUntrusted,
  kNoMem,     // ENOMEM: out of (device or host) memory
};

std::string_view ErrorCodeName(ErrorCode code);      // "EPERM", ...; "OK" for kOk
ErrorCode ErrorCodeFromName(std::string_view name);  // unknown names -> kIo

struct Status {
  ErrorCode code = ErrorCode::kOk;
  std::string message;  // one line, no trailing newline; empty on success

  bool ok() const { return code == ErrorCode::kOk; }
  static Status Ok() { return {}; }
  // An error never carries kOk (that would read as success): it becomes kIo.
  static Status Error(ErrorCode c, std::string m) {
    return {c == ErrorCode::kOk ? ErrorCode::kIo : c, std::move(m)};
  }
};

}  // namespace vgpu
