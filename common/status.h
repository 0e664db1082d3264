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

// A value, or the Status that says why there is none: `return value;` or
// `return Status::Error(...);`. T is default-constructible: the value of an
// error reads as T{}, never as garbage.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}       // NOLINT: implicit, as a return value
  Result(Status error) : status_(std::move(error)) {  // NOLINT: implicit, as a return value
    // An "error" that says OK would read as success without a value.
    if (status_.ok()) status_ = Status::Error(ErrorCode::kIo, "internal error: empty result");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const { return value_; }
  T& value() { return value_; }
  const T* operator->() const { return &value_; }
  T* operator->() { return &value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace vgpu
