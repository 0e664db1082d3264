#include "ctl/cdi/cdi_host.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ctl/cdi/library_deps.h"
#include "driver/node_gpus.h"
#include "driver/real_driver.h"

namespace vgpu::cdi {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCommonNodes[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};
constexpr size_t kMaxSpecBytes = 4 << 20;

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Normal(const std::string& path) { return fs::path(path).lexically_normal().string(); }

std::string DirOf(const std::string& path) { return fs::path(path).parent_path().string(); }

// An optional path: itself if it exists, else "" and a warning.
std::string Optional(const std::string& path, const char* what, std::vector<std::string>* w) {
  if (Exists(path)) return path;
  w->push_back(path + " (" + what + ") does not exist: left out of the spec");
  return "";
}

std::string RunLdconfig() {
  for (const char* bin : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    if (access(bin, X_OK) != 0) continue;
    FILE* p = popen((std::string(bin) + " -p 2>/dev/null").c_str(), "r");
    if (p == nullptr) return "";
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
    return out;
  }
  return "";
}

// The directory NVML was loaded from: the library this process's loader
// found (LD_LIBRARY_PATH included, which is how the simulated node is used).
std::string NvmlDir() {
  Dl_info info{};
  auto* sym = reinterpret_cast<void*>(driver::Nvml().nvmlInit_v2_);
  if (sym == nullptr || dladdr(sym, &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  return path.find('/') == std::string::npos ? "" : DirOf(fs::absolute(path).string());
}

Status FindGpus(const HostOptions& o, std::vector<Gpu>* gpus) {
  if (o.gpus) {
    for (int i = 0; i < *o.gpus; ++i) gpus->push_back({i, "", ""});
    return Status::Ok();
  }
  driver::NodeGpus nvml;
  if (Status st = nvml.Init(); !st.ok()) {
    return Status::Error(st.code,
                         "cannot list the GPUs through NVML (" + st.message + "): give --gpus N");
  }
  for (const driver::GpuMemory& g : nvml.Read()) gpus->push_back({g.index, g.uuid, ""});
  if (gpus->empty()) return Status::Error(ErrorCode::kNoEnt, "NVML lists no GPU: give --gpus N");
  return Status::Ok();
}

Status FindDriverDir(const HostOptions& o, std::string* dir) {
  if (!o.driver_dir.empty()) return *dir = o.driver_dir, Status::Ok();
  std::string libcuda = LibraryFromLdconfig(RunLdconfig(), kLibcuda);
  *dir = libcuda.empty() ? NvmlDir() : DirOf(libcuda);
  if (!dir->empty()) return Status::Ok();
  return Status::Error(ErrorCode::kNoEnt,
                       "libcuda.so.1 is not known to ldconfig: give --driver-dir DIR");
}

Status FindLibraries(const HostOptions& o, Inventory* inv, std::vector<std::string>* w) {
  inv->libvgpu = Normal(o.libvgpu.empty() ? o.exe_dir + "/../lib/libvgpu.so" : o.libvgpu);
  if (!Exists(inv->libvgpu)) {
    return Status::Error(ErrorCode::kNoEnt,
                         "libvgpu.so not found at " + inv->libvgpu + ": give --libvgpu PATH");
  }
  std::string dir;
  if (Status st = FindDriverDir(o, &dir); !st.ok()) return st;
  inv->libcuda = Normal(dir + "/" + std::string(kLibcuda));
  if (!Exists(inv->libcuda)) {
    return Status::Error(ErrorCode::kNoEnt,
                         inv->libcuda + " does not exist: give --driver-dir DIR");
  }
  inv->libnvml = Optional(Normal(dir + "/" + std::string(kLibnvml)), "NVML", w);
  std::vector<std::string> libs = {inv->libcuda};
  if (!inv->libnvml.empty()) libs.push_back(inv->libnvml);
  // A glibc-only image needs them; a spec without them still serves images
  // that have them, so what cannot be found is a warning.
  if (Status st = NonGlibcDependencies(libs, dir, RunLdconfig(), &inv->driver_deps); !st.ok()) {
    w->push_back(st.message + ": the driver's libraries are mounted without what they need");
  }
  return Status::Ok();
}

void FindDeviceNodes(const HostOptions& o, Inventory* inv, std::vector<std::string>* w) {
  for (Gpu& g : inv->gpus) {
    g.device_node = Optional(o.dev_dir + "/nvidia" + std::to_string(g.index), "GPU device", w);
  }
  for (std::string_view n : kCommonNodes) {
    std::string path = Optional(o.dev_dir + "/" + std::string(n), "device node", w);
    if (!path.empty()) inv->common_nodes.push_back(path);
  }
}

}  // namespace

Status CollectInventory(const HostOptions& o, Inventory* inv, std::vector<std::string>* warnings) {
  *inv = Inventory{};
  if (Status st = FindGpus(o, &inv->gpus); !st.ok()) return st;
  if (Status st = FindLibraries(o, inv, warnings); !st.ok()) return st;
  FindDeviceNodes(o, inv, warnings);
  if (IsDirectory(o.run_dir)) {
    inv->run_dir = o.run_dir;
  } else {
    warnings->push_back(o.run_dir + " (run directory) does not exist: left out of the spec");
  }
  inv->hook = Optional(o.exe_dir + "/" + std::string(kHookName), "OCI hook", warnings);
  if (!o.node_config.empty() && Exists(o.node_config)) inv->node_config = o.node_config;
  std::vector<std::string> shared = o.node_files;
  if (!o.sched_region_file.empty()) shared.insert(shared.begin(), o.sched_region_file);
  for (const std::string& f : shared) {
    if (!Exists(f)) return Status::Error(ErrorCode::kNoEnt, f + " (node file) does not exist");
    inv->shared_files.push_back(f);
  }
  return Status::Ok();
}

std::string LibraryFromLdconfig(std::string_view output, std::string_view soname) {
  std::string any;
  std::istringstream lines{std::string(output)};
  for (std::string line; std::getline(lines, line);) {
    // "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    size_t start = line.find_first_not_of(" \t");
    size_t arrow = line.find(" => ");
    if (start == std::string::npos || arrow == std::string::npos) continue;
    if (line.compare(start, soname.size() + 2, std::string(soname) + " (") != 0) continue;
    std::string path = line.substr(arrow + 4);
    // 32-bit entries say only "(libc6)"; 64-bit ones name their ABI.
    if (line.substr(start, arrow - start).find("64") != std::string::npos) return path;
    if (any.empty()) any = path;
  }
  return any;
}

Status WriteFileAtomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(ErrorCode::kIo, tmp + ": " + std::strerror(errno));
  // The umask must not make a spec the runtime (another user) cannot read.
  int err = fchmod(fd, 0644) == 0 ? 0 : errno;
  for (size_t done = 0; err == 0 && done < text.size();) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (err == 0 && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err == 0) return Status::Ok();
  unlink(tmp.c_str());
  return Status::Error(ErrorCode::kIo, path + ": " + std::strerror(err));
}

Status ReadSpecFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(ErrorCode::kNoEnt, "cannot be read");
  text->assign(kMaxSpecBytes + 1, '\0');
  in.read(text->data(), static_cast<std::streamsize>(text->size()));
  text->resize(static_cast<size_t>(in.gcount()));
  if (text->size() > kMaxSpecBytes) return Status::Error(ErrorCode::kTooBig, "larger than 4 MiB");
  return Status::Ok();
}

Status SpecFiles(const std::string& path, std::vector<std::string>* files) {
  files->clear();
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::Error(ErrorCode::kNoEnt, path + " does not exist");
  if (!fs::is_directory(path, ec)) return files->push_back(path), Status::Ok();
  // Only JSON: other tools' YAML specs (nvidia.yaml) are not ours to read.
  std::error_code entry_ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json" && it->is_regular_file(entry_ec)) {
      files->push_back(it->path());
    }
  }
  if (ec) return Status::Error(ErrorCode::kIo, path + ": " + ec.message());
  std::sort(files->begin(), files->end());
  return Status::Ok();
}

std::string RunningExeDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

}  // namespace vgpu::cdi
