// vgpu_sample_train: linear regression by SGD through the CUDA driver API.
//
// Loads the kernels of sgd_kernels.cu from a cubin or fatbin, uploads a
// deterministic synthetic dataset, trains with mini-batch SGD on a stream and
// prints the full-dataset loss every few steps and an FNV-1a 64 checksum of the
// final weights. samples/train.py does exactly the same from Python; for the
// same arguments both print the same losses and checksum.
//
// Runs on a real GPU or on the simulated node (LD_LIBRARY_PATH=<build>/lib/
// vgpu/sim, VGPU_SIM_KERNELS=<build>/samples/libvgpu_sample_kernels.so).
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef VGPU_SAMPLE_DIR
#define VGPU_SAMPLE_DIR "."
#endif

namespace {

// Dataset and model; train.py uses the same constants.
constexpr int kSamples = 4096;
constexpr int kFeatures = 16;
constexpr int kBatch = 256;
constexpr float kLearningRate = 0.1f;
constexpr uint64_t kSeed = 42;
constexpr unsigned kBlock = 256;

struct Options {
  int steps = 200;
  int report_every = 10;
  int sleep_ms = 0;
  int device = 0;
  std::string module_path;
};

[[noreturn]] void Fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "vgpu_sample_train: error: %s\n", message.c_str());
  std::exit(1);
}

void Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown CUresult";
  if (cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "no description";
  Fail(std::string(what) + " failed: " + name + " (" + std::to_string(r) + "): " + text);
}
#define CU(call) Check((call), #call)

void Usage() {
  std::printf(
      "usage: vgpu_sample_train [--steps N] [--report-every K] "
      "[--sleep-ms M]\n"
      "                         [--device D] [CUBIN_OR_FATBIN]\n"
      "Trains a linear model by SGD with the kernels of sgd_kernels.cu.\n"
      "The module defaults to sgd_kernels.cubin next to this executable.\n"
      "On the simulated node, VGPU_SIM_KERNELS defaults to\n"
      "libvgpu_sample_kernels.so next to this executable.\n");
}

int ParseInt(const char* flag, const char* value, int min) {
  if (value == nullptr) Fail(std::string(flag) + " needs a value");
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || v < min || v > 1'000'000'000)
    Fail(std::string("bad value for ") + flag + ": " + value);
  return static_cast<int>(v);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  const std::pair<const char*, int*> int_flags[] = {{"--steps", &o.steps},
                                                    {"--report-every", &o.report_every},
                                                    {"--sleep-ms", &o.sleep_ms},
                                                    {"--device", &o.device}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage();
      std::exit(0);
    }
    bool matched = false;
    for (const auto& [flag, value] : int_flags) {
      if (a != flag) continue;
      const int min = a == "--steps" || a == "--report-every" ? 1 : 0;
      *value = ParseInt(flag, i + 1 < argc ? argv[++i] : nullptr, min);
      matched = true;
    }
    if (matched) continue;
    if (a.empty() || a[0] == '-' || !o.module_path.empty()) {
      Usage();
      Fail("unknown argument: " + a);
    }
    o.module_path = a;
  }
  return o;
}

// Directory of this executable, for the default module and kernel library.
std::string ExeDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return VGPU_SAMPLE_DIR;
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

void ApplyDefaults(Options* o) {
  const std::string dir = ExeDir();
  if (o->module_path.empty()) o->module_path = dir + "/sgd_kernels.cubin";
  const std::string kernels = dir + "/libvgpu_sample_kernels.so";
  if (std::getenv("VGPU_SIM_KERNELS") == nullptr && Exists(kernels))
    setenv("VGPU_SIM_KERNELS", kernels.c_str(), 0);
}

// The dataset: X uniform in [-1, 1), y = X w_true + noise, from a 64-bit LCG.
struct Dataset {
  std::vector<float> x, y;
};

float NextUniform(uint64_t* state) {  // in [-1, 1), exact in float
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(*state >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
}

Dataset MakeDataset() {
  Dataset ds{std::vector<float>(kSamples * kFeatures), std::vector<float>(kSamples)};
  float w_true[kFeatures];
  for (int j = 0; j < kFeatures; ++j) w_true[j] = (j % 7 - 3) * 0.25f;
  uint64_t state = kSeed;
  for (int i = 0; i < kSamples; ++i) {
    float acc = 0.0f;
    for (int j = 0; j < kFeatures; ++j) {
      float v = NextUniform(&state);
      ds.x[i * kFeatures + j] = v;
      acc += v * w_true[j];
    }
    ds.y[i] = acc + 0.01f * NextUniform(&state);
  }
  return ds;
}

uint64_t Fnv1a64(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void PrintDevices(int chosen) {
  int count = 0;
  CU(cuDeviceGetCount(&count));
  std::printf("devices: %d\n", count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    char name[256];
    size_t total = 0;
    int major = 0, minor = 0;
    CU(cuDeviceGet(&dev, i));
    CU(cuDeviceGetName(name, sizeof(name), dev));
    CU(cuDeviceTotalMem(&total, dev));
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    std::printf("  %c device %d: %s, %.2f GiB, compute capability %d.%d\n", i == chosen ? '*' : ' ',
                i, name, total / 1073741824.0, major, minor);
  }
  if (chosen >= count) Fail("--device " + std::to_string(chosen) + " out of range");
}

class Trainer {
 public:
  Trainer(CUmodule module, CUstream stream) : stream_(stream) {
    CU(cuModuleGetFunction(&forward_grad_, module, "sgd_forward_grad"));
    CU(cuModuleGetFunction(&update_, module, "sgd_update"));
  }
  ~Trainer() {
    for (CUdeviceptr p : {x_, y_, w_, grad_, loss_}) cuMemFree(p);
  }

  void Upload(const Dataset& ds) {
    CU(cuMemAlloc(&x_, ds.x.size() * sizeof(float)));
    CU(cuMemAlloc(&y_, ds.y.size() * sizeof(float)));
    CU(cuMemAlloc(&w_, kFeatures * sizeof(float)));
    CU(cuMemAlloc(&grad_, kFeatures * sizeof(float)));
    CU(cuMemAlloc(&loss_, sizeof(float)));
    CU(cuMemcpyHtoD(x_, ds.x.data(), ds.x.size() * sizeof(float)));
    CU(cuMemcpyHtoD(y_, ds.y.data(), ds.y.size() * sizeof(float)));
    CU(cuMemsetD32Async(w_, 0, kFeatures, stream_));  // w = 0
  }

  // Mini-batch `step % (kSamples / kBatch)`: gradient, then w -= lr * grad.
  void Step(int step) {
    const int batch = step % (kSamples / kBatch);
    ForwardGrad(x_ + sizeof(float) * kFeatures * kBatch * batch,
                y_ + sizeof(float) * kBatch * batch, kBatch);
    float lr = kLearningRate;
    int d = kFeatures;
    void* params[] = {&w_, &grad_, &lr, &d};
    CU(cuLaunchKernel(update_, 1, 1, 1, kBlock, 1, 1, 0, stream_, params, nullptr));
  }

  // Loss over the whole dataset for the current weights.
  float Loss() {
    ForwardGrad(x_, y_, kSamples);
    float loss = 0.0f;
    CU(cuMemcpyDtoHAsync(&loss, loss_, sizeof(loss), stream_));
    CU(cuStreamSynchronize(stream_));
    return loss;
  }

  std::vector<float> Weights() {
    std::vector<float> w(kFeatures);
    CU(cuStreamSynchronize(stream_));
    CU(cuMemcpyDtoH(w.data(), w_, w.size() * sizeof(float)));
    return w;
  }

 private:
  void ForwardGrad(CUdeviceptr x, CUdeviceptr y, int n) {
    CU(cuMemsetD32Async(grad_, 0, kFeatures, stream_));
    CU(cuMemsetD32Async(loss_, 0, 1, stream_));
    int d = kFeatures;
    void* params[] = {&x, &y, &w_, &grad_, &loss_, &n, &d};
    const unsigned grid = (n + kBlock - 1) / kBlock;
    CU(cuLaunchKernel(forward_grad_, grid, 1, 1, kBlock, 1, 1, 0, stream_, params, nullptr));
  }

  CUstream stream_;
  CUfunction forward_grad_ = nullptr, update_ = nullptr;
  CUdeviceptr x_ = 0, y_ = 0, w_ = 0, grad_ = 0, loss_ = 0;
};

void PrintLoss(int step, float loss) {
  std::printf("step %5d  loss %.6e\n", step, loss);
  std::fflush(stdout);
}

// Returns the process exit status: 0, or 2 if the loss did not decrease.
int Train(const Options& o, CUmodule module, CUstream stream) {
  Trainer t(module, stream);
  t.Upload(MakeDataset());
  const float initial = t.Loss();
  PrintLoss(0, initial);
  float loss = initial;
  for (int step = 1; step <= o.steps; ++step) {
    t.Step(step - 1);
    if (step % o.report_every == 0 || step == o.steps) {
      loss = t.Loss();
      PrintLoss(step, loss);
    }
    if (o.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
  }
  std::vector<float> w = t.Weights();
  std::printf("final loss %.6e (initial %.6e)\n", loss, initial);
  std::printf("checksum: 0x%016" PRIx64 "\n", Fnv1a64(w.data(), w.size() * sizeof(float)));
  if (loss < initial) return 0;
  std::fflush(stdout);
  std::fprintf(stderr, "vgpu_sample_train: error: loss did not decrease\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  ApplyDefaults(&o);
  std::printf("vgpu sample: linear regression by SGD (C++, driver API)\n");
  CU(cuInit(0));
  PrintDevices(o.device);
  std::printf("device %d, module %s\n", o.device, o.module_path.c_str());
  std::printf("dataset: %d samples x %d features, batch %d, lr %g\n", kSamples, kFeatures, kBatch,
              kLearningRate);
  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUstream stream;
  CU(cuDeviceGet(&dev, o.device));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CU(cuModuleLoad(&module, o.module_path.c_str()));
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  int status = Train(o, module, stream);
  CU(cuStreamDestroy(stream));
  CU(cuModuleUnload(module));
  CU(cuDevicePrimaryCtxRelease(dev));
  return status;
}
