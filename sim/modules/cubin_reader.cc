#include "sim/modules/cubin_reader.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vgpu::sim {
namespace {

constexpr uint16_t kEmCuda = 190;
constexpr uint8_t kStoCudaEntry = 0x10;  // st_other bit of __global__ functions
// The image ceiling: protects CubinExtent from absurd header values.
constexpr uint64_t kMaxCubinBytes = 1ull << 31;
// sm_90 and later reserve the first KiB of a CTA's shared window for the
// system; ptxas includes it in .nv.shared.<kernel> but not in the kernel's
// own static shared size (what CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES reports).
constexpr uint64_t kReservedSharedBytes = 1024;

// .nv.info record formats (first byte of a record).
enum : uint8_t { kFmtNoValue = 1, kFmtU8 = 2, kFmtU16 = 3, kFmtSized = 4 };
// .nv.info attributes (second byte) the simulator reads.
enum : uint8_t {
  kAttrMaxThreads = 0x05,      // u32 x, y, z: __launch_bounds__
  kAttrParamCbank = 0x0a,      // u32 sym, u16 offset, u16 size
  kAttrReqNtid = 0x10,         // u32 x, y, z: .reqntid
  kAttrFrameSize = 0x11,       // global: u32 sym, u32 bytes
  kAttrKparamInfo = 0x17,      // u32 index, u16 ordinal, u16 offset, u32 size << 18 | flags
  kAttrCbankParamSize = 0x19,  // u16 total parameter bytes
  kAttrRegCount = 0x2f,        // global: u32 sym, u32 registers
  kAttrClusterDims = 0x3d,     // u32 x, y, z: __cluster_dims__
  kAttrKparamInfoV2 = 0x45,    // u32 index, u16 ordinal, u16 offset, u32 size (large params)
};

struct NvInfoRecord {
  uint8_t attr;
  uint16_t value;          // the value (kFmtU8/kFmtU16) or payload size (kFmtSized)
  const uint8_t* payload;  // kFmtSized only
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

// Calls fn(record) for each record of an .nv.info section; false if the
// section is malformed (unknown format or a payload past its end).
template <typename Fn>
bool ForEachNvInfo(const uint8_t* p, size_t n, Fn&& fn) {
  size_t i = 0;
  while (i + 4 <= n) {
    const uint8_t fmt = p[i];
    NvInfoRecord r{p[i + 1], Load<uint16_t>(p + i + 2), nullptr};
    i += 4;
    if (fmt == kFmtSized) {
      if (r.value > n - i) return false;
      r.payload = p + i;
      i += r.value;
    } else if (fmt == kFmtU8) {
      r.value &= 0xff;
    } else if (fmt != kFmtNoValue && fmt != kFmtU16) {
      return false;
    }
    if (!fn(r)) return false;
  }
  return i == n;
}

struct Section {
  std::string_view name;
  GElf_Shdr hdr{};
  const uint8_t* bytes = nullptr;  // nullptr for NOBITS
  size_t size = 0;                 // bytes available at `bytes`
};

struct Symbol {
  std::string_view name;
  GElf_Sym sym{};
  size_t index = 0;
};

struct KParam {
  uint32_t ordinal, offset, size;
};

struct ElfDeleter {
  void operator()(Elf* e) const { elf_end(e); }
};

class CubinParser {
 public:
  CubinParser(Elf* elf, std::string* error) : elf_(elf), error_(error) {}

  CUresult Parse(ModuleImage* out) {
    if (!ReadHeader(out) || !ReadSections() || !ReadSymbols() || !ReadModuleInfo()) {
      return CUDA_ERROR_INVALID_IMAGE;
    }
    for (const Symbol& s : symbols_) {
      if (IsKernel(s)) {
        KernelInfo k;
        if (!ReadKernel(s, &k)) return CUDA_ERROR_INVALID_IMAGE;
        out->kernels.push_back(std::move(k));
      } else if (IsVariable(s)) {
        GlobalInfo g;
        if (!ReadVariable(s, &g)) return CUDA_ERROR_INVALID_IMAGE;
        out->globals.push_back(std::move(g));
      }
    }
    return CUDA_SUCCESS;
  }

 private:
  bool Fail(std::string message) {
    *error_ = "invalid cubin: " + std::move(message);
    return false;
  }

  bool ReadHeader(ModuleImage* out) {
    GElf_Ehdr ehdr;
    if (elf_kind(elf_) != ELF_K_ELF || gelf_getclass(elf_) != ELFCLASS64 ||
        gelf_getehdr(elf_, &ehdr) == nullptr) {
      return Fail("not a 64-bit ELF image");
    }
    if (ehdr.e_machine != kEmCuda) return Fail("ELF machine is not NVIDIA CUDA");
    out->format = ImageFormat::kCubin;
    // ELF ABI version 8 (CUDA 13) moved the SM number from bits 0-7 to 8-15.
    out->arch = ehdr.e_ident[EI_ABIVERSION] >= 8 ? (ehdr.e_flags >> 8) & 0xff : ehdr.e_flags & 0xff;
    return true;
  }

  bool ReadSections() {
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return Fail("no section name table");
    size_t count = 0;
    if (elf_getshdrnum(elf_, &count) != 0) return Fail("no section table");
    sections_.resize(count);
    for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
      const size_t idx = elf_ndxscn(scn);
      if (idx >= count) return Fail("section index out of range");
      Section& s = sections_[idx];
      if (gelf_getshdr(scn, &s.hdr) == nullptr) return Fail("bad section header");
      const char* name = elf_strptr(elf_, shstrndx, s.hdr.sh_name);
      if (name == nullptr) return Fail("bad section name");
      s.name = name;
      by_name_[s.name] = idx;
      if (s.hdr.sh_type == SHT_NOBITS || s.hdr.sh_size == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);  // libelf checks it lies in the image
      if (data == nullptr || data->d_size < s.hdr.sh_size) {
        return Fail("section " + std::string(s.name) + " extends past the image");
      }
      s.bytes = static_cast<const uint8_t*>(data->d_buf);
      s.size = data->d_size;
    }
    return true;
  }

  bool ReadSymbols() {
    for (size_t i = 0; i < sections_.size(); ++i) {
      const Section& s = sections_[i];
      if (s.hdr.sh_type != SHT_SYMTAB) continue;
      Elf_Data* data = elf_getdata(elf_getscn(elf_, i), nullptr);
      const size_t entsize = s.hdr.sh_entsize ? s.hdr.sh_entsize : sizeof(Elf64_Sym);
      if (data == nullptr) return Fail("unreadable symbol table");
      const size_t n = data->d_size / entsize;
      for (size_t j = 0; j < n; ++j) {
        Symbol sym;
        sym.index = j;
        if (gelf_getsym(data, static_cast<int>(j), &sym.sym) == nullptr) {
          return Fail("bad symbol");
        }
        const char* name = elf_strptr(elf_, s.hdr.sh_link, sym.sym.st_name);
        if (name == nullptr) return Fail("bad symbol name");
        sym.name = name;
        symbols_.push_back(sym);
      }
      return true;
    }
    return Fail("no symbol table");
  }

  const Section* FindSection(std::string_view prefix, std::string_view name) const {
    std::string full(prefix);
    full += name;
    auto it = by_name_.find(full);
    return it == by_name_.end() ? nullptr : &sections_[it->second];
  }
  bool HasSection(std::string_view name) const { return by_name_.count(name) != 0; }
  const Section* SectionOf(const Symbol& s) const {
    const size_t idx = s.sym.st_shndx;
    if (idx == SHN_UNDEF || idx >= SHN_LORESERVE || idx >= sections_.size()) return nullptr;
    return &sections_[idx];
  }

  // Module-wide .nv.info: register counts and stack frames, keyed by symbol.
  bool ReadModuleInfo() {
    auto it = by_name_.find(".nv.info");
    if (it == by_name_.end()) return true;
    const Section& s = sections_[it->second];
    const bool ok = ForEachNvInfo(s.bytes, s.size, [this](const NvInfoRecord& r) {
      if ((r.attr == kAttrRegCount || r.attr == kAttrFrameSize) && r.payload && r.value >= 8) {
        auto& map = r.attr == kAttrRegCount ? regs_ : frame_;
        map[Load<uint32_t>(r.payload)] = Load<uint32_t>(r.payload + 4);
      }
      return true;
    });
    return ok || Fail("malformed .nv.info");
  }

  bool IsKernel(const Symbol& s) const {
    if (GELF_ST_TYPE(s.sym.st_info) != STT_FUNC || !(s.sym.st_other & kStoCudaEntry)) {
      return false;
    }
    const Section* sec = SectionOf(s);
    return sec && sec->name.substr(0, 6) == ".text." && sec->name.substr(6) == s.name;
  }

  bool ReadKernel(const Symbol& s, KernelInfo* k) {
    k->name = std::string(s.name);
    const uint32_t idx = static_cast<uint32_t>(s.index);
    if (auto it = regs_.find(idx); it != regs_.end()) k->num_regs = static_cast<int>(it->second);
    if (auto it = frame_.find(idx); it != frame_.end()) k->local_bytes = it->second;
    if (const Section* sh = FindSection(".nv.shared.", s.name)) {
      uint64_t bytes = sh->hdr.sh_size;
      if (bytes >= kReservedSharedBytes && HasSection(".nv.shared.reserved.0")) {
        bytes -= kReservedSharedBytes;
      }
      k->static_shared_bytes = static_cast<uint32_t>(bytes);
    }
    const Section* info = FindSection(".nv.info.", s.name);
    if (info == nullptr) return true;  // no parameters and no launch bounds
    return ReadKernelInfo(*info, k);
  }

  bool ReadKernelInfo(const Section& info, KernelInfo* k) {
    std::vector<KParam> params;
    uint32_t total = 0;
    const bool ok = ForEachNvInfo(info.bytes, info.size, [&](const NvInfoRecord& r) {
      const uint8_t* p = r.payload;
      if ((r.attr == kAttrKparamInfo || r.attr == kAttrKparamInfoV2) && p && r.value >= 12) {
        const uint32_t w = Load<uint32_t>(p + 8);
        const uint32_t size = r.attr == kAttrKparamInfo ? (w >> 18) & 0x3fff : w & 0xffff;
        params.push_back({Load<uint16_t>(p + 4), Load<uint16_t>(p + 6), size});
      } else if (r.attr == kAttrCbankParamSize && !p) {
        total = r.value;
      } else if (r.attr == kAttrParamCbank && p && r.value >= 8 && total == 0) {
        total = Load<uint16_t>(p + 6);
      } else if ((r.attr == kAttrMaxThreads || r.attr == kAttrReqNtid) && p && r.value >= 12) {
        k->launch_bound_threads = Load<uint32_t>(p) * Load<uint32_t>(p + 4) * Load<uint32_t>(p + 8);
      } else if (r.attr == kAttrClusterDims && p && r.value >= 12) {
        for (int d = 0; d < 3; ++d) k->required_cluster[d] = Load<uint32_t>(p + 4 * d);
      }
      return true;
    });
    if (!ok) return Fail("malformed .nv.info." + k->name);
    return BuildParams(std::move(params), total, k);
  }

  // Orders the KPARAM records by ordinal and checks they tile the buffer.
  bool BuildParams(std::vector<KParam> params, uint32_t total, KernelInfo* k) {
    std::sort(params.begin(), params.end(),
              [](const KParam& a, const KParam& b) { return a.ordinal < b.ordinal; });
    uint32_t end = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].ordinal != i || params[i].size == 0) {
        return Fail("inconsistent parameter records for " + k->name);
      }
      k->param_offsets.push_back(params[i].offset);
      k->param_sizes.push_back(params[i].size);
      end = std::max(end, params[i].offset + params[i].size);
    }
    if (total != 0 && end > total) return Fail("parameters of " + k->name + " overflow");
    k->param_bytes = total ? total : end;
    return true;
  }

  static bool IsVariableSection(std::string_view name) {
    return name == ".nv.global" || name == ".nv.global.init" ||
           (name.substr(0, 12) == ".nv.constant" && name.find('.', 12) == std::string_view::npos);
  }

  bool IsVariable(const Symbol& s) const {
    if (GELF_ST_TYPE(s.sym.st_info) != STT_OBJECT || s.sym.st_size == 0 || s.name.empty()) {
      return false;
    }
    const Section* sec = SectionOf(s);
    return sec && IsVariableSection(sec->name);
  }

  bool ReadVariable(const Symbol& s, GlobalInfo* g) {
    const Section& sec = *SectionOf(s);
    g->name = std::string(s.name);
    g->size = s.sym.st_size;
    g->align = static_cast<uint32_t>(std::clamp<uint64_t>(sec.hdr.sh_addralign, 1, 256));
    g->is_constant = sec.name.substr(0, 12) == ".nv.constant";
    if (sec.bytes == nullptr) return true;  // NOBITS: zero-initialized
    if (s.sym.st_value > sec.size || g->size > sec.size - s.sym.st_value) {
      return Fail("variable " + g->name + " lies outside its section");
    }
    g->init.assign(sec.bytes + s.sym.st_value, sec.bytes + s.sym.st_value + g->size);
    return true;
  }

  Elf* elf_;
  std::string* error_;
  std::vector<Section> sections_;
  std::unordered_map<std::string_view, size_t> by_name_;
  std::vector<Symbol> symbols_;
  std::unordered_map<uint32_t, uint32_t> regs_, frame_;
};

}  // namespace

CUresult ReadCubin(const void* data, size_t size, ModuleImage* out, std::string* error) {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  if (data == nullptr || size < sizeof(Elf64_Ehdr)) {
    *error = "invalid cubin: image too small";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  // libelf wants a mutable, aligned buffer; the caller's image may be neither.
  std::vector<uint8_t> copy(static_cast<const uint8_t*>(data),
                            static_cast<const uint8_t*>(data) + size);
  std::unique_ptr<Elf, ElfDeleter> elf(elf_memory(reinterpret_cast<char*>(copy.data()), size));
  if (!elf) {
    *error = std::string("invalid cubin: ") + elf_errmsg(-1);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *out = ModuleImage{};
  return CubinParser(elf.get(), error).Parse(out);
}

size_t CubinExtent(const void* data) {
  Elf64_Ehdr eh;
  memcpy(&eh, data, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return 0;
  uint64_t end = sizeof eh;
  if (eh.e_phoff < kMaxCubinBytes && eh.e_phnum) {
    end = std::max<uint64_t>(end, eh.e_phoff + uint64_t{eh.e_phnum} * eh.e_phentsize);
  }
  if (eh.e_shoff >= kMaxCubinBytes || eh.e_shnum == 0 || eh.e_shentsize < sizeof(Elf64_Shdr)) {
    return end;
  }
  end = std::max<uint64_t>(end, eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize);
  const auto* base = static_cast<const uint8_t*>(data);
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    memcpy(&sh, base + eh.e_shoff + uint64_t{i} * eh.e_shentsize, sizeof sh);
    if (sh.sh_type == SHT_NOBITS || sh.sh_offset >= kMaxCubinBytes ||
        sh.sh_size >= kMaxCubinBytes) {
      continue;
    }
    end = std::max<uint64_t>(end, sh.sh_offset + sh.sh_size);
  }
  return static_cast<size_t>(std::min(end, kMaxCubinBytes));
}

}  // namespace vgpu::sim
