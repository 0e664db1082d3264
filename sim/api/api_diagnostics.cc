// Coredump settings (cuCoredump*) and the CUDA 12.9 error-log API (cuLogs*).
// The simulated device never takes a GPU exception, so no coredump is ever
// written; the settings are stored and answered as documented. The driver's
// log buffer stays empty: the sim reports its errors on stderr instead.
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct CoredumpSettings {
  bool enable_on_exception = false;
  bool trigger_host = true;
  bool lightweight = false;
  bool user_trigger = false;
  std::string file;
  std::string pipe;
  int generation_flags = CU_COREDUMP_DEFAULT_FLAGS;
};

constexpr size_t kPathBytes = 1024;  // strings of up to 1023 characters

std::string DefaultName(const char* prefix) {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  return std::string(prefix) + host + "." + std::to_string(getpid());
}

std::mutex g_dump_mu;
CoredumpSettings* g_global = nullptr;
std::map<Context*, CoredumpSettings>* g_per_ctx = new std::map<Context*, CoredumpSettings>();

CoredumpSettings& Global() {
  if (g_global == nullptr) {
    g_global = new CoredumpSettings();
    g_global->file = DefaultName("core.cuda.");
    g_global->pipe = DefaultName("corepipe.cuda.");
  }
  return *g_global;
}

// A context starts from the global settings; CU_CTX_COREDUMP_ENABLE and
// CU_CTX_USER_COREDUMP_ENABLE at creation enable dumps for it.
CoredumpSettings& OfContext(Context* c) {
  auto it = g_per_ctx->find(c);
  if (it != g_per_ctx->end()) return it->second;
  CoredumpSettings s = Global();
  if ((c->flags & (CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE)) != 0) s.enable_on_exception = true;
  if ((c->flags & CU_CTX_USER_COREDUMP_ENABLE) != 0) s.user_trigger = true;
  return g_per_ctx->emplace(c, s).first->second;
}

size_t AttributeSize(int attrib) {
  switch (attrib) {
    case CU_COREDUMP_ENABLE_ON_EXCEPTION:
    case CU_COREDUMP_TRIGGER_HOST:
    case CU_COREDUMP_LIGHTWEIGHT:
    case CU_COREDUMP_ENABLE_USER_TRIGGER: return sizeof(bool);
    case CU_COREDUMP_FILE:
    case CU_COREDUMP_PIPE: return kPathBytes;
    case CU_COREDUMP_GENERATION_FLAGS: return sizeof(int);
    default: return 0;
  }
}

bool* BoolField(CoredumpSettings& s, int attrib) {
  switch (attrib) {
    case CU_COREDUMP_ENABLE_ON_EXCEPTION: return &s.enable_on_exception;
    case CU_COREDUMP_TRIGGER_HOST: return &s.trigger_host;
    case CU_COREDUMP_LIGHTWEIGHT: return &s.lightweight;
    case CU_COREDUMP_ENABLE_USER_TRIGGER: return &s.user_trigger;
    default: return nullptr;
  }
}

CUresult GetAttribute(CoredumpSettings& s, int attrib, void* value, size_t* size) {
  const size_t need = AttributeSize(attrib);
  if (need == 0 || size == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (value == nullptr) {
    *size = need;
    return CUDA_SUCCESS;
  }
  if (attrib == CU_COREDUMP_FILE || attrib == CU_COREDUMP_PIPE) {
    const std::string& str = attrib == CU_COREDUMP_FILE ? s.file : s.pipe;
    if (*size < str.size() + 1) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(value, str.c_str(), str.size() + 1);
    *size = str.size() + 1;
    return CUDA_SUCCESS;
  }
  if (*size < need) return CUDA_ERROR_INVALID_VALUE;
  if (bool* b = BoolField(s, attrib); b != nullptr) {
    std::memcpy(value, b, sizeof *b);
  } else {
    std::memcpy(value, &s.generation_flags, sizeof s.generation_flags);
  }
  *size = need;
  return CUDA_SUCCESS;
}

CUresult SetAttribute(CoredumpSettings& s, int attrib, const void* value, size_t* size) {
  const size_t need = AttributeSize(attrib);
  if (need == 0 || size == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (value == nullptr) {
    *size = need;
    return CUDA_SUCCESS;
  }
  if (attrib == CU_COREDUMP_FILE || attrib == CU_COREDUMP_PIPE) {
    const size_t len = strnlen(static_cast<const char*>(value), *size);
    if (len == *size || len >= kPathBytes) return CUDA_ERROR_INVALID_VALUE;  // unterminated or too long
    (attrib == CU_COREDUMP_FILE ? s.file : s.pipe).assign(static_cast<const char*>(value), len);
    return CUDA_SUCCESS;
  }
  if (*size < need) return CUDA_ERROR_INVALID_VALUE;
  if (bool* b = BoolField(s, attrib); b != nullptr) {
    std::memcpy(b, value, sizeof *b);
    return CUDA_SUCCESS;
  }
  int flags = 0;
  std::memcpy(&flags, value, sizeof flags);
  constexpr int kKnown = CU_COREDUMP_LIGHTWEIGHT_FLAGS | CU_COREDUMP_SKIP_ABORT | CU_COREDUMP_SKIP_CONSTBANK_MEMORY;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  s.generation_flags = flags;
  return CUDA_SUCCESS;
}

// Log callbacks: registered and unregistered as documented; the sim's log is
// always empty, so none is ever called.
std::mutex g_logs_mu;
std::set<CUlogsCallbackHandle>* g_log_callbacks = new std::set<CUlogsCallbackHandle>();
struct LogCallback {
  CUlogsCallback fn;
  void* user;
};

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuCoredumpGetAttribute(CUcoredumpSettings attrib, void* value, size_t* size) {
  SIM_ENTER("cuCoredumpGetAttribute");
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return GetAttribute(OfContext(c), RawEnum(attrib), value, size);
}

SIM_EXPORT CUresult CUDAAPI cuCoredumpGetAttributeGlobal(CUcoredumpSettings attrib, void* value, size_t* size) {
  SIM_ENTER("cuCoredumpGetAttributeGlobal");
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return GetAttribute(Global(), RawEnum(attrib), value, size);
}

// ENABLE_USER_TRIGGER and PIPE cannot be set per context (cuda.h).
SIM_EXPORT CUresult CUDAAPI cuCoredumpSetAttribute(CUcoredumpSettings attrib, void* value, size_t* size) {
  SIM_ENTER("cuCoredumpSetAttribute");
  const int a = RawEnum(attrib);
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (value != nullptr && (a == CU_COREDUMP_ENABLE_USER_TRIGGER || a == CU_COREDUMP_PIPE)) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return SetAttribute(OfContext(c), a, value, size);
}

SIM_EXPORT CUresult CUDAAPI cuCoredumpSetAttributeGlobal(CUcoredumpSettings attrib, void* value, size_t* size) {
  SIM_ENTER("cuCoredumpSetAttributeGlobal");
  std::lock_guard<std::mutex> lock(g_dump_mu);
  return SetAttribute(Global(), RawEnum(attrib), value, size);
}

SIM_EXPORT CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void* userData,
                                                   CUlogsCallbackHandle* callback_out) {
  SIM_ENTER("cuLogsRegisterCallback");
  if (callbackFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* h = reinterpret_cast<CUlogsCallbackHandle>(new LogCallback{callbackFunc, userData});
  std::lock_guard<std::mutex> lock(g_logs_mu);
  g_log_callbacks->insert(h);
  if (callback_out != nullptr) *callback_out = h;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback) {
  SIM_ENTER("cuLogsUnregisterCallback");
  std::lock_guard<std::mutex> lock(g_logs_mu);
  if (g_log_callbacks->erase(callback) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete reinterpret_cast<LogCallback*>(callback);
  return CUDA_SUCCESS;
}

// The log holds no entries: its tail is always position 0.
SIM_EXPORT CUresult CUDAAPI cuLogsCurrent(CUlogIterator* iterator_out, unsigned int flags) {
  SIM_ENTER("cuLogsCurrent");
  if (iterator_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *iterator_out = 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLogsDumpToFile(CUlogIterator* iterator, const char* pathToFile, unsigned int flags) {
  SIM_ENTER("cuLogsDumpToFile");
  if (pathToFile == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = open(pathToFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  close(fd);
  return CUDA_SUCCESS;
}

// "If there are no messages to dump, *size will be set to 0 and the function
// will return CUDA_SUCCESS"; the buffer is still NUL-terminated.
SIM_EXPORT CUresult CUDAAPI cuLogsDumpToMemory(CUlogIterator* iterator, char* buffer, size_t* size,
                                               unsigned int flags) {
  SIM_ENTER("cuLogsDumpToMemory");
  if (buffer == nullptr || size == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (*size > 0) buffer[0] = '\0';
  *size = 0;
  return CUDA_SUCCESS;
}
