#include "sim/modules/module_image.h"

#include <elf.h>

#include <cstring>

#include "sim/modules/builtin_kernels.h"
#include "sim/modules/cubin_reader.h"
#include "sim/modules/fatbin_reader.h"
#include "sim/modules/ptx_reader.h"

namespace vgpu::sim {
namespace {

constexpr uint32_t kElfMagic = 0x464c457f;  // "\x7f" "ELF"

std::string CcText(const ImageTarget& t) {
  return std::to_string(t.cc_major) + "." + std::to_string(t.cc_minor);
}

bool IsBuiltinName(const void* data, size_t size) {
  return size >= sizeof kBuiltinModuleName &&
         memcmp(data, kBuiltinModuleName, sizeof kBuiltinModuleName) == 0;
}

CUresult ParseCubinFor(const void* data, size_t size, const ImageTarget& target, ModuleImage* out,
                       std::string* error) {
  if (CUresult r = ReadCubin(data, size, out, error); r != CUDA_SUCCESS) return r;
  if (!SassRunsOn(out->arch, target)) {
    *error = "cubin built for sm_" + std::to_string(out->arch) +
             " does not run on a device of compute capability " + CcText(target);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  return CUDA_SUCCESS;
}

CUresult ParsePtxFor(const void* data, size_t size, const ImageTarget& target, ModuleImage* out,
                     std::string* error) {
  if (CUresult r = ReadPtx(static_cast<const char*>(data), size, out, error); r != CUDA_SUCCESS) {
    return r;
  }
  if (out->arch > target.cc_major * 10 + target.cc_minor) {
    *error = "PTX .target sm_" + std::to_string(out->arch) +
             " is newer than the device (compute capability " + CcText(target) + ")";
    return CUDA_ERROR_INVALID_PTX;
  }
  return CUDA_SUCCESS;
}

// Picks what the driver would run: the newest SASS that runs on the device,
// else the newest PTX it can JIT.
const FatbinEntry* SelectFatbinEntry(const std::vector<FatbinEntry>& entries,
                                     const ImageTarget& target) {
  const FatbinEntry* best_sass = nullptr;
  const FatbinEntry* best_ptx = nullptr;
  const int cc = target.cc_major * 10 + target.cc_minor;
  for (const FatbinEntry& e : entries) {
    if (e.kind == static_cast<uint16_t>(FatbinKind::kCubin) && SassRunsOn(e.arch, target) &&
        (!best_sass || e.arch > best_sass->arch)) {
      best_sass = &e;
    } else if (e.kind == static_cast<uint16_t>(FatbinKind::kPtx) && e.arch <= cc &&
               (!best_ptx || e.arch > best_ptx->arch)) {
      best_ptx = &e;
    }
  }
  return best_sass ? best_sass : best_ptx;
}

CUresult ParseFatbinFor(const void* data, size_t size, const ImageTarget& target, ModuleImage* out,
                        std::string* error) {
  std::vector<FatbinEntry> entries;
  if (!ListFatbinEntries(data, size, &entries, error)) return CUDA_ERROR_INVALID_IMAGE;
  const FatbinEntry* e = SelectFatbinEntry(entries, target);
  if (e == nullptr) {
    std::string archs;
    for (const FatbinEntry& x : entries) {
      archs += (archs.empty() ? "" : ", ") +
               std::string(x.kind == static_cast<uint16_t>(FatbinKind::kPtx) ? "compute_" : "sm_") +
               std::to_string(x.arch);
    }
    *error = "fatbin has no code for compute capability " + CcText(target) +
             " (it holds: " + (archs.empty() ? "nothing" : archs) + ")";
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  std::vector<uint8_t> payload;
  if (CUresult r = FatbinEntryPayload(*e, &payload, error); r != CUDA_SUCCESS) return r;
  const CUresult r = e->kind == static_cast<uint16_t>(FatbinKind::kCubin)
                         ? ParseCubinFor(payload.data(), payload.size(), target, out, error)
                         : ParsePtxFor(payload.data(), payload.size(), target, out, error);
  if (r == CUDA_SUCCESS) out->format = ImageFormat::kFatbin;
  return r;
}

}  // namespace

bool SassRunsOn(int arch, const ImageTarget& target) {
  return arch / 10 == target.cc_major && arch % 10 <= target.cc_minor;
}

void LayOutParams(const std::vector<uint32_t>& aligns, KernelInfo* kernel) {
  uint32_t offset = 0;
  kernel->param_offsets.clear();
  for (size_t i = 0; i < kernel->param_sizes.size(); ++i) {
    const uint32_t a = i < aligns.size() && aligns[i] ? aligns[i] : 1;
    offset = (offset + a - 1) / a * a;
    kernel->param_offsets.push_back(offset);
    offset += kernel->param_sizes[i];
  }
  kernel->param_bytes = offset;
}

size_t ImageExtent(const void* data) {
  if (data == nullptr) return 0;
  if (StartsWithMagic(data, kFatbinWrapperMagic)) return 24;  // sizeof(__fatBinC_Wrapper_t)
  if (StartsWithMagic(data, kFatbinMagic)) return FatbinExtent(data);
  if (StartsWithMagic(data, kElfMagic)) return CubinExtent(data);
  const char* text = static_cast<const char*>(data);
  const size_t len = strlen(text) + 1;
  return LooksLikePtx(text, len) || IsBuiltinName(text, len) ? len : 0;
}

CUresult ParseModuleImage(const void* data, size_t size, const ImageTarget& target,
                          ModuleImage* out, std::string* error) {
  try {
    *out = ModuleImage{};
    if (data == nullptr || size < sizeof(uint32_t)) {
      *error = size == 0 ? "not a cubin, fatbin or PTX image" : "image is truncated";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    uint32_t magic;
    memcpy(&magic, data, sizeof magic);
    if (magic == kFatbinWrapperMagic && size >= 24) {
      const void* fatbin = UnwrapFatbin(data);
      if (fatbin == nullptr) {
        *error = "fatbin wrapper points at nothing";
        return CUDA_ERROR_INVALID_IMAGE;
      }
      return ParseFatbinFor(fatbin, FatbinExtent(fatbin), target, out, error);
    }
    if (magic == kFatbinMagic) return ParseFatbinFor(data, size, target, out, error);
    if (memcmp(data, ELFMAG, SELFMAG) == 0) return ParseCubinFor(data, size, target, out, error);
    if (IsBuiltinName(data, size)) {
      *out = BuiltinModuleImage();
      return CUDA_SUCCESS;
    }
    if (LooksLikePtx(data, size)) return ParsePtxFor(data, size, target, out, error);
    *error = "not a cubin, fatbin or PTX image";
    return CUDA_ERROR_INVALID_IMAGE;
  } catch (const std::bad_alloc&) {
    *error = "out of host memory while reading the image";
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    *error = std::string("unreadable image: ") + e.what();
    return CUDA_ERROR_INVALID_IMAGE;
  }
}

}  // namespace vgpu::sim
