#include "common/process_info.h"

#include <signal.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vgpu {

uint64_t ProcessStartTime(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name may contain spaces and parentheses: fields restart after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  unsigned long long start = 0;
  // Fields 3..22 after ")": state is field 3, starttime is field 22.
  int field = 2;
  for (const char* q = p + 1; *q != '\0'; ++q) {
    if (*q == ' ') {
      ++field;
      if (field == 22) {
        start = std::strtoull(q + 1, nullptr, 10);
        break;
      }
    }
  }
  char state = p[2];
  if (state == 'Z' || state == 'X') return 0;  // a zombie holds no GPU memory
  return start;
}

bool ProcessAlive(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;  // kill() would address a process group
  if (start_time == 0) return kill(pid, 0) == 0 || errno == EPERM;  // signal 0 is never sent
  return ProcessStartTime(pid) == start_time;
}

bool ProcessStopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold ')'
  if (p == nullptr || p[1] != ' ') return false;
  return p[2] == 'T' || p[2] == 't';
}

uint64_t ProcessImageId() {
  const auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM));
  uint64_t id = 0;
  if (bytes != nullptr) std::memcpy(&id, bytes, sizeof id);
  return id == 0 ? 1 : id;
}

uint64_t PidNamespaceId() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

}  // namespace vgpu
