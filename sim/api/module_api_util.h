// Helpers shared by the module and library entry points.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace vgpu::sim {

// Runs an entry point's body; exported functions never let an exception out.
template <typename F>
CUresult NoThrow(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

// Reads a module file. CUDA_ERROR_FILE_NOT_FOUND if it cannot be opened or
// read. "@builtin" yields the built-in module's name instead of a file.
CUresult ReadImageFile(const char* path, std::vector<uint8_t>* out);

// The info/error log buffers of cuModuleLoadDataEx / cuLibraryLoadData JIT
// options (CU_JIT_INFO_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER and their sizes).
class JitLogs {
 public:
  // CUDA_ERROR_INVALID_VALUE if options are given without their arrays.
  CUresult Parse(unsigned int n, const CUjit_option* options, void** values);
  // Writes `error` to the error log and an empty info log, and stores the
  // bytes written back into the size options, as the driver does.
  void Write(const std::string& error);

 private:
  struct Buffer {
    char* data = nullptr;
    size_t size = 0;
    void** size_slot = nullptr;  // where the option's value lives
  };
  static void Fill(Buffer* b, const std::string& text);
  Buffer info_, error_;
};

}  // namespace vgpu::sim
