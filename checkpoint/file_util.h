// POSIX file helpers for the image writer and reader: full reads and writes
// that retry on EINTR and short transfers, the temp-file naming of the
// atomic-write protocol, and the cleanup of temp files left by killed writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vgpu::checkpoint {

// strerror(err) as a std::string (thread-safe).
std::string ErrnoText(int err);

// Reads exactly n bytes at offset. Returns 0, an errno value, or -1 when the
// file ends first.
int PreadAll(int fd, void* data, size_t n, uint64_t offset);

// Directory part of a path ("." when there is none) and the last component.
std::string DirName(const std::string& path);
std::string BaseName(const std::string& path);

// "<path>.tmp.<pid>.<16 hex digits>": same directory as the final image, so
// rename() is atomic; the pid tells a later writer whether its author is gone.
std::string MakeTempPath(const std::string& path);

// Removes "<path>.tmp.<pid>.*" files whose writer process no longer exists
// (kill(pid, 0) fails with ESRCH). Files of live processes, including ones
// that merely reuse a dead writer's pid, are left alone: they are ignored by
// readers anyway. Best effort; errors are ignored.
void RemoveStaleTemps(const std::string& path);

// Renames `from` to `to` unless `to` exists (EEXIST then), atomically:
// renameat2(RENAME_NOREPLACE), or link() + unlink() on file systems without
// it. 0 or errno.
int RenameNoReplace(const std::string& from, const std::string& to);

// fsync() of a directory, so that a rename() in it is durable. 0 or errno.
int FsyncDir(const std::string& dir);

}  // namespace vgpu::checkpoint
