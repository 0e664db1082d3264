#include "sim/engine/sim_log.h"

#include <cstdarg>
#include <cstdio>

namespace vgpu::sim {

void SimLog(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "vgpu-sim: %s\n", buf);
}

}  // namespace vgpu::sim
