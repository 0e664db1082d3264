#include "sim/api/module_api_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "sim/modules/module_image.h"

namespace vgpu::sim {

CUresult ReadImageFile(const char* path, std::vector<uint8_t>* out) {
  if (strcmp(path, kBuiltinModuleName) == 0) {
    out->assign(kBuiltinModuleName, kBuiltinModuleName + sizeof kBuiltinModuleName);
    return CUDA_SUCCESS;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_FILE_NOT_FOUND;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) {
    out->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (ok && done < out->size()) {
      const ssize_t n = read(fd, out->data() + done, out->size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      done += ok ? static_cast<size_t>(n) : 0;
    }
  }
  close(fd);
  if (!ok) return CUDA_ERROR_FILE_NOT_FOUND;
  out->push_back(0);  // PTX text files are not NUL-terminated
  return CUDA_SUCCESS;
}

CUresult JitLogs::Parse(unsigned int n, const CUjit_option* options, void** values) {
  if (n == 0) return CUDA_SUCCESS;
  if (options == nullptr || values == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < n; ++i) {
    const auto v = reinterpret_cast<uintptr_t>(values[i]);
    switch (options[i]) {
      case CU_JIT_INFO_LOG_BUFFER:
        info_.data = static_cast<char*>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        info_.size = v;
        info_.size_slot = &values[i];
        break;
      case CU_JIT_ERROR_LOG_BUFFER:
        error_.data = static_cast<char*>(values[i]);
        break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        error_.size = v;
        error_.size_slot = &values[i];
        break;
      default:
        if (options[i] >= CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
        break;  // other JIT options do not change what the simulator runs
    }
  }
  return CUDA_SUCCESS;
}

void JitLogs::Fill(Buffer* b, const std::string& text) {
  if (b->data == nullptr || b->size == 0) return;
  const size_t n = std::min(text.size(), b->size - 1);
  memcpy(b->data, text.data(), n);
  b->data[n] = '\0';
  if (b->size_slot) *b->size_slot = reinterpret_cast<void*>(static_cast<uintptr_t>(n + 1));
}

void JitLogs::Write(const std::string& error) {
  Fill(&info_, "");
  Fill(&error_, error);
}

}  // namespace vgpu::sim
