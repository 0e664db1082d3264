// The JIT linker (cuLinkCreate/AddData/AddFile/Complete/Destroy, the CUDA 5.5
// names and the _v2 ones). The sim runs kernels by name through host
// implementations, so linking is the union of the inputs' kernels and
// variables, with no relocation to resolve:
//  - one input: the output image is that input, as given (a cubin, fatbin or
//    PTX, all of which cuModuleLoadData accepts);
//  - several: a PTX module the sim writes, declaring every kernel (parameter
//    layout, .maxntid, cluster dimensions) and every global (size, alignment,
//    initial bytes). Register and shared-memory counts are not carried over
//    (PTX has none), so occupancy queries on the result see PTX defaults.
// Host objects, archives and LTO-IR (CU_JIT_INPUT_OBJECT/LIBRARY/NVVM) are not
// read: CUDA_ERROR_INVALID_IMAGE with a message in the error log.
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/api/module_api_util.h"
#include "sim/modules/module_image.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

#undef cuLinkCreate  // cuda.h maps the CUDA 5.5 names to the _v2 ones
#undef cuLinkAddData
#undef cuLinkAddFile

namespace {

struct LinkState {
  ImageTarget target;
  JitLogs logs;  // the caller's buffers stay valid for the state's life (cuda.h)
  std::vector<std::vector<uint8_t>> inputs;
  ModuleImage merged;
  std::vector<uint8_t> output;
};

std::mutex g_mu;
auto* g_links = new std::unordered_set<LinkState*>();

LinkState* Live(CUlinkState h) {
  auto* s = reinterpret_cast<LinkState*>(h);
  std::lock_guard<std::mutex> lock(g_mu);
  return g_links->count(s) != 0 ? s : nullptr;
}

// cuda.h: per-input options are compiler options only.
CUresult CheckInputOptions(unsigned n, const CUjit_option* options, void** values) {
  if (n == 0) return CUDA_SUCCESS;
  if (options == nullptr || values == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; ++i) {
    switch (options[i]) {
      case CU_JIT_WALL_TIME:
      case CU_JIT_INFO_LOG_BUFFER:
      case CU_JIT_ERROR_LOG_BUFFER:
      case CU_JIT_TARGET_FROM_CUCONTEXT:
      case CU_JIT_TARGET:
        return CUDA_ERROR_INVALID_VALUE;
      default:
        if (options[i] >= CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult Create(unsigned n, CUjit_option* options, void** values, CUlinkState* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* s = new LinkState();
  if (CUresult r = s->logs.Parse(n, options, values); r != CUDA_SUCCESS) {
    delete s;
    return r;
  }
  const auto& dev = Node().device(ctx->device);
  s->target = {dev.cc_major, dev.cc_minor};
  std::lock_guard<std::mutex> lock(g_mu);
  g_links->insert(s);
  *out = reinterpret_cast<CUlinkState>(s);
  return CUDA_SUCCESS;
}

CUresult Fail(LinkState* s, CUresult r, const std::string& why) {
  s->logs.Write(why);
  SimLog("cuLinkAddData: %s", why.c_str());
  return r;
}

CUresult Add(CUlinkState h, CUjitInputType type, const void* data, size_t size, const char* name,
             unsigned n, CUjit_option* options, void** values) {
  LinkState* s = Live(h);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (data == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckInputOptions(n, options, values); r != CUDA_SUCCESS) return r;
  const std::string label = name != nullptr ? name : "input";
  const int t = RawEnum(type);
  if (t == CU_JIT_INPUT_OBJECT || t == CU_JIT_INPUT_LIBRARY || t == CU_JIT_INPUT_NVVM) {
    return Fail(s, CUDA_ERROR_INVALID_IMAGE,
                label + ": host objects, archives and LTO-IR are not read by the simulator");
  }
  if (t != CU_JIT_INPUT_CUBIN && t != CU_JIT_INPUT_PTX && t != CU_JIT_INPUT_FATBINARY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ModuleImage image;
  std::string error;
  if (CUresult r = ParseModuleImage(data, size, s->target, &image, &error); r != CUDA_SUCCESS) {
    return Fail(s, r, label + ": " + error);
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  s->inputs.emplace_back(bytes, bytes + size);
  for (KernelInfo& k : image.kernels) s->merged.kernels.push_back(std::move(k));
  for (GlobalInfo& g : image.globals) s->merged.globals.push_back(std::move(g));
  return CUDA_SUCCESS;
}

CUresult AddFile(CUlinkState h, CUjitInputType type, const char* path, unsigned n,
                 CUjit_option* options, void** values) {
  if (Live(h) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint8_t> bytes;
  if (CUresult r = ReadImageFile(path, &bytes); r != CUDA_SUCCESS) return r;
  // ReadImageFile ends the bytes with a NUL for PTX text; an image keeps its own size.
  const size_t size = RawEnum(type) == CU_JIT_INPUT_PTX ? bytes.size() : bytes.size() - 1;
  return Add(h, type, bytes.data(), size, path, n, options, values);
}

// The largest power of two (up to 16) that puts a parameter at `offset`.
unsigned ParamAlign(uint32_t offset) {
  unsigned a = 16;
  while (a > 1 && offset % a != 0) a /= 2;
  return a;
}

void WriteKernel(const KernelInfo& k, std::string* ptx) {
  *ptx += ".visible .entry " + k.name + "(";
  for (size_t i = 0; i < k.param_sizes.size(); ++i) {
    *ptx += (i == 0 ? "\n" : ",\n") + std::string("  .param .align ") +
            std::to_string(ParamAlign(k.param_offsets[i])) + " .b8 " + k.name + "_param_" +
            std::to_string(i) + "[" + std::to_string(k.param_sizes[i]) + "]";
  }
  *ptx += ")\n";
  if (k.launch_bound_threads != 0)
    *ptx += ".maxntid " + std::to_string(k.launch_bound_threads) + ", 1, 1\n";
  if (k.required_cluster[0] != 0) {
    *ptx += ".reqnctapercluster " + std::to_string(k.required_cluster[0]) + ", " +
            std::to_string(k.required_cluster[1]) + ", " + std::to_string(k.required_cluster[2]) +
            "\n";
  }
  *ptx += "{\n  ret;\n}\n";
}

void WriteGlobal(const GlobalInfo& g, std::string* ptx) {
  *ptx += std::string(g.is_constant ? ".const" : ".global") + " .align " + std::to_string(g.align) +
          " .b8 " + g.name + "[" + std::to_string(g.size) + "]";
  if (!g.init.empty()) {
    *ptx += " = {";
    for (uint64_t i = 0; i < g.size; ++i) {
      *ptx += (i == 0 ? "" : ",") + std::to_string(i < g.init.size() ? g.init[i] : 0);
    }
    *ptx += "}";
  }
  *ptx += ";\n";
}

std::string MergedPtx(const LinkState& s) {
  const int arch = s.target.cc_major * 10 + s.target.cc_minor;
  std::string ptx = "// linked by the vgpu simulator\n.version 8.0\n.target sm_" +
                    std::to_string(arch) + "\n.address_size 64\n";
  for (const GlobalInfo& g : s.merged.globals) WriteGlobal(g, &ptx);
  for (const KernelInfo& k : s.merged.kernels) WriteKernel(k, &ptx);
  return ptx;
}

CUresult Complete(CUlinkState h, void** out, size_t* size_out) {
  LinkState* s = Live(h);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (s->inputs.empty()) {
    s->logs.Write("no input to link");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s->inputs.size() == 1) {
    s->output = s->inputs.front();
  } else {
    const std::string ptx = MergedPtx(*s);
    s->output.assign(ptx.begin(), ptx.end());
    s->output.push_back(0);
  }
  s->logs.Write(std::string());
  *out = s->output.data();
  if (size_out != nullptr) *size_out = s->output.size();
  return CUDA_SUCCESS;
}

CUresult Destroy(CUlinkState h) {
  auto* s = reinterpret_cast<LinkState*>(h);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_links->erase(s) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  delete s;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                            void** optionValues, CUlinkState* stateOut) {
  SIM_ENTER("cuLinkCreate_v2");
  return NoThrow([&] { return Create(numOptions, options, optionValues, stateOut); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option* options,
                                         void** optionValues, CUlinkState* stateOut) {
  SIM_ENTER("cuLinkCreate");
  return NoThrow([&] { return Create(numOptions, options, optionValues, stateOut); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data,
                                             size_t size, const char* name, unsigned int numOptions,
                                             CUjit_option* options, void** optionValues) {
  SIM_ENTER("cuLinkAddData_v2");
  return NoThrow(
      [&] { return Add(state, type, data, size, name, numOptions, options, optionValues); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void* data,
                                          size_t size, const char* name, unsigned int numOptions,
                                          CUjit_option* options, void** optionValues) {
  SIM_ENTER("cuLinkAddData");
  return NoThrow(
      [&] { return Add(state, type, data, size, name, numOptions, options, optionValues); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type,
                                             const char* path, unsigned int numOptions,
                                             CUjit_option* options, void** optionValues) {
  SIM_ENTER("cuLinkAddFile_v2");
  return NoThrow([&] { return AddFile(state, type, path, numOptions, options, optionValues); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path,
                                          unsigned int numOptions, CUjit_option* options,
                                          void** optionValues) {
  SIM_ENTER("cuLinkAddFile");
  return NoThrow([&] { return AddFile(state, type, path, numOptions, options, optionValues); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
  SIM_ENTER("cuLinkComplete");
  return NoThrow([&] { return Complete(state, cubinOut, sizeOut); });
}

SIM_EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  SIM_ENTER("cuLinkDestroy");
  return NoThrow([&] { return Destroy(state); });
}
