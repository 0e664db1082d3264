#include "common/status.h"

#include <utility>

namespace vgpu {
namespace {

constexpr std::pair<ErrorCode, std::string_view> kCodeNames[] = {
    {ErrorCode::kOk, "OK"},           {ErrorCode::kPerm, "EPERM"},
    {ErrorCode::kInval, "EINVAL"},    {ErrorCode::kBusy, "EBUSY"},
    {ErrorCode::kNoEnt, "ENOENT"},    {ErrorCode::kIo, "EIO"},
    {ErrorCode::kNoSys, "ENOSYS"},    {ErrorCode::kProto, "EPROTO"},
    {ErrorCode::kTooBig, "E2BIG"},    {ErrorCode::kTimedOut, "ETIMEDOUT"},
    {ErrorCode::kExist, "EEXIST"},    {ErrorCode::kUntrusted, "EUNTRUSTED"},
    {ErrorCode::kNoMem, "ENOMEM"},
};

}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  for (const auto& [c, name] : kCodeNames) {
    if (c == code) return name;
  }
  return "EIO";
}

ErrorCode ErrorCodeFromName(std::string_view name) {
  for (const auto& [c, n] : kCodeNames) {
    if (n == name && c != ErrorCode::kOk) return c;
  }
  return ErrorCode::kIo;
}

}  // namespace vgpu
