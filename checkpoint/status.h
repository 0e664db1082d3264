// A small success-or-error result for the checkpoint image library. Every
// public entry point returns one instead of throwing: restore code must be able
// to refuse an image and keep running, whatever the input.
#pragma once

#include <string>
#include <utility>

namespace vgpu::checkpoint {

class Status {
 public:
  Status() = default;  // success
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  // One line, no trailing newline; empty on success.
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

}  // namespace vgpu::checkpoint
