#include "ctl/cdi/library_deps.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "ctl/cdi/cdi_host.h"

namespace vgpu::cdi {
namespace {

struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};

// The DT_NEEDED entries of one SHT_DYNAMIC section.
void CollectNeeded(Elf* elf, Elf_Scn* scn, const GElf_Shdr& hdr, std::vector<std::string>* out) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr || hdr.sh_entsize == 0) return;
  const size_t count = hdr.sh_size / hdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Dyn dyn{};
    if (gelf_getdyn(data, static_cast<int>(i), &dyn) == nullptr || dyn.d_tag == DT_NULL) break;
    if (dyn.d_tag != DT_NEEDED) continue;
    if (const char* name = elf_strptr(elf, hdr.sh_link, dyn.d_un.d_val)) out->push_back(name);
  }
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Status NeededSonames(const std::string& path, std::vector<std::string>* out) {
  out->clear();
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(ErrorCode::kNoEnt, path + ": " + std::strerror(errno));
  std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd, ELF_C_READ, nullptr));
  Status st = Status::Ok();
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) {
    st = Status::Error(ErrorCode::kInval, path + " is not an ELF file");
  } else {
    for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
      GElf_Shdr hdr{};
      if (gelf_getshdr(scn, &hdr) != nullptr && hdr.sh_type == SHT_DYNAMIC) {
        CollectNeeded(elf.get(), scn, hdr, out);
      }
    }
  }
  elf.reset();
  close(fd);
  return st;
}

bool IsGlibcSoname(std::string_view soname) {
  static constexpr std::string_view kGlibc[] = {"libc.so.6",       "libm.so.6",   "libdl.so.2",
                                                "libpthread.so.0", "librt.so.1",  "libutil.so.1",
                                                "libresolv.so.2",  "libanl.so.1", "libmvec.so.1"};
  return soname.starts_with("ld-linux") ||
         std::find(std::begin(kGlibc), std::end(kGlibc), soname) != std::end(kGlibc);
}

Status NonGlibcDependencies(const std::vector<std::string>& libraries,
                            const std::string& driver_dir, std::string_view ldconfig_output,
                            std::vector<std::string>* out) {
  out->clear();
  std::vector<std::string> todo = libraries, seen;
  while (!todo.empty()) {
    const std::string lib = todo.back();
    todo.pop_back();
    std::vector<std::string> needed;
    if (Status st = NeededSonames(lib, &needed); !st.ok()) return st;
    for (const std::string& soname : needed) {
      if (IsGlibcSoname(soname) || std::ranges::count(seen, soname) > 0) continue;
      seen.push_back(soname);
      std::string path = driver_dir + "/" + soname;
      if (!IsFile(path)) path = LibraryFromLdconfig(ldconfig_output, soname);
      if (path.empty()) {
        return Status::Error(ErrorCode::kNoEnt, lib + " needs " + soname +
                                                    ", which is neither in " + driver_dir +
                                                    " nor known to ldconfig");
      }
      out->push_back(path);
      todo.push_back(path);
    }
  }
  return Status::Ok();
}

}  // namespace vgpu::cdi
