#!/usr/bin/env python3
"""Linear regression by SGD through the CUDA driver API, from Python.

Standard library only: ctypes over libcuda.so.1 as the dynamic loader finds it,
so LD_LIBRARY_PATH=<build>/lib/vgpu/sim runs it on the simulated node and
LD_PRELOAD=<build>/lib/libvgpu.so runs it under vgpu. Same kernels (the cubin of
sgd_kernels.cu), same dataset and same output as vgpu_sample_train: for the same
arguments both print the same losses and the same checksum.

usage: train.py [--steps N] [--report-every K] [--sleep-ms M] [--device D]
                [CUBIN_OR_FATBIN]
"""

import argparse
import ctypes
import os
import struct
import sys
import time

SAMPLES = 4096
FEATURES = 16
BATCH = 256
LEARNING_RATE = 0.1
SEED = 42
BLOCK = 256
MASK64 = (1 << 64) - 1

CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_STREAM_NON_BLOCKING = 1

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BUILD_SAMPLES = os.path.join(REPO, "build", "samples")

CUdeviceptr = ctypes.c_uint64
_F32 = struct.Struct("<f")


def f32(value):
    """Rounds a Python float to the nearest float32, like a C float operation."""
    return _F32.unpack(_F32.pack(value))[0]


class CudaError(Exception):
    pass


class Driver:
    """The few driver entry points the sample uses, with their ABI names."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaError(
                f"cannot load libcuda.so.1 ({e}); for the simulated node set "
                "LD_LIBRARY_PATH=<build>/lib/vgpu/sim") from None
        self.lib.cuGetErrorName.argtypes = [
            ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self.lib.cuGetErrorString.argtypes = [
            ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def __call__(self, name, *args):
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        result = fn(*args)
        if result != 0:
            raise CudaError(f"{name} failed: {self.describe(result)}")

    def describe(self, result):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        if self.lib.cuGetErrorName(result, ctypes.byref(name)) != 0:
            name.value = b"unknown CUresult"
        if self.lib.cuGetErrorString(result, ctypes.byref(text)) != 0:
            text.value = b"no description"
        return f"{name.value.decode()} ({result}): {text.value.decode()}"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--report-every", type=int, default=10)
    p.add_argument("--sleep-ms", type=int, default=0)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("module", nargs="?",
                   default=os.path.join(DEFAULT_BUILD_SAMPLES,
                                        "sgd_kernels.cubin"),
                   help="cubin or fatbin of sgd_kernels.cu "
                   "(default: build/samples/sgd_kernels.cubin)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.report_every < 1 or args.sleep_ms < 0 \
            or args.device < 0:
        p.error("--steps and --report-every must be >= 1, "
                "--sleep-ms and --device >= 0")
    return args


def apply_defaults(args):
    """On the sim, find the kernels' host library next to the module."""
    lib = os.path.join(os.path.dirname(os.path.abspath(args.module)),
                       "libvgpu_sample_kernels.so")
    if "VGPU_SIM_KERNELS" not in os.environ and os.path.exists(lib):
        os.environ["VGPU_SIM_KERNELS"] = lib


def make_dataset():
    """X uniform in [-1, 1), y = X w_true + noise: bit-identical to train.cc."""
    w_true = [(j % 7 - 3) * 0.25 for j in range(FEATURES)]
    noise_scale = f32(0.01)
    x = [0.0] * (SAMPLES * FEATURES)
    y = [0.0] * SAMPLES
    state = SEED

    def uniform():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK64
        return (state >> 40) / 16777216.0 * 2.0 - 1.0  # exact in float32

    for i in range(SAMPLES):
        acc = 0.0
        for j in range(FEATURES):
            v = uniform()
            x[i * FEATURES + j] = v
            acc = f32(acc + f32(v * w_true[j]))
        y[i] = f32(acc + f32(noise_scale * uniform()))
    return (ctypes.c_float * len(x))(*x), (ctypes.c_float * len(y))(*y)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & MASK64
    return h


def print_devices(cu, chosen):
    count = ctypes.c_int()
    cu("cuDeviceGetCount", ctypes.byref(count))
    print(f"devices: {count.value}")
    for i in range(count.value):
        dev, total = ctypes.c_int(), ctypes.c_size_t()
        major, minor = ctypes.c_int(), ctypes.c_int()
        name = ctypes.create_string_buffer(256)
        cu("cuDeviceGet", ctypes.byref(dev), i)
        cu("cuDeviceGetName", name, len(name), dev)
        cu("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
        cu("cuDeviceGetAttribute", ctypes.byref(major),
           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        cu("cuDeviceGetAttribute", ctypes.byref(minor),
           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        mark = "*" if i == chosen else " "
        print(f"  {mark} device {i}: {name.value.decode()}, "
              f"{total.value / 1073741824.0:.2f} GiB, "
              f"compute capability {major.value}.{minor.value}")
    if chosen >= count.value:
        raise CudaError(f"--device {chosen} out of range")


class Trainer:
    def __init__(self, cu, module, stream):
        self.cu, self.stream = cu, stream
        self.forward_grad = self._function(module, b"sgd_forward_grad")
        self.update = self._function(module, b"sgd_update")
        self.buffers = []

    def _function(self, module, name):
        f = ctypes.c_void_p()
        self.cu("cuModuleGetFunction", ctypes.byref(f), module, name)
        return f

    def _alloc(self, nbytes):
        p = CUdeviceptr()
        self.cu("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(nbytes))
        self.buffers.append(p)
        return p

    def upload(self, x, y):
        self.x = self._alloc(ctypes.sizeof(x))
        self.y = self._alloc(ctypes.sizeof(y))
        self.w = self._alloc(4 * FEATURES)
        self.grad = self._alloc(4 * FEATURES)
        self.loss = self._alloc(4)
        self.cu("cuMemcpyHtoD_v2", self.x, x, ctypes.c_size_t(ctypes.sizeof(x)))
        self.cu("cuMemcpyHtoD_v2", self.y, y, ctypes.c_size_t(ctypes.sizeof(y)))
        self._memset(self.w, FEATURES)

    def _memset(self, ptr, count):
        self.cu("cuMemsetD32Async", ptr, ctypes.c_uint(0),
                ctypes.c_size_t(count), self.stream)

    def _launch(self, f, grid, args):
        params = (ctypes.c_void_p * len(args))(
            *[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        self.cu("cuLaunchKernel", f, grid, 1, 1, BLOCK, 1, 1, 0, self.stream,
                params, None)

    def _forward_grad(self, x, y, n):
        self._memset(self.grad, FEATURES)
        self._memset(self.loss, 1)
        grid = (n + BLOCK - 1) // BLOCK
        self._launch(self.forward_grad, grid,
                     [CUdeviceptr(x), CUdeviceptr(y), self.w, self.grad,
                      self.loss, ctypes.c_int(n), ctypes.c_int(FEATURES)])

    def step(self, step):
        batch = step % (SAMPLES // BATCH)
        self._forward_grad(self.x.value + 4 * FEATURES * BATCH * batch,
                           self.y.value + 4 * BATCH * batch, BATCH)
        self._launch(self.update, 1,
                     [self.w, self.grad, ctypes.c_float(LEARNING_RATE),
                      ctypes.c_int(FEATURES)])

    def full_loss(self):
        self._forward_grad(self.x.value, self.y.value, SAMPLES)
        loss = ctypes.c_float()
        self.cu("cuMemcpyDtoHAsync_v2", ctypes.byref(loss), self.loss,
                ctypes.c_size_t(4), self.stream)
        self.cu("cuStreamSynchronize", self.stream)
        return loss.value

    def weights(self):
        w = (ctypes.c_float * FEATURES)()
        self.cu("cuStreamSynchronize", self.stream)
        self.cu("cuMemcpyDtoH_v2", w, self.w, ctypes.c_size_t(4 * FEATURES))
        return bytes(w)

    def free(self):
        for p in self.buffers:
            self.cu("cuMemFree_v2", p)


def print_loss(step, loss):
    print(f"step {step:5d}  loss {loss:.6e}", flush=True)


def train(args, cu, module, stream):
    t = Trainer(cu, module, stream)
    t.upload(*make_dataset())
    initial = loss = t.full_loss()
    print_loss(0, initial)
    for step in range(1, args.steps + 1):
        t.step(step - 1)
        if step % args.report_every == 0 or step == args.steps:
            loss = t.full_loss()
            print_loss(step, loss)
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000.0)
    w = t.weights()
    t.free()
    print(f"final loss {loss:.6e} (initial {initial:.6e})")
    print(f"checksum: 0x{fnv1a64(w):016x}")
    if loss < initial:
        return 0
    print("train.py: error: loss did not decrease", file=sys.stderr)
    return 2


def main(argv):
    args = parse_args(argv)
    apply_defaults(args)
    print("vgpu sample: linear regression by SGD (Python, driver API)")
    cu = Driver()
    cu("cuInit", 0)
    print_devices(cu, args.device)
    print(f"device {args.device}, module {args.module}")
    print(f"dataset: {SAMPLES} samples x {FEATURES} features, batch {BATCH}, "
          f"lr {LEARNING_RATE:g}")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    module, stream = ctypes.c_void_p(), ctypes.c_void_p()
    cu("cuDeviceGet", ctypes.byref(dev), args.device)
    cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    cu("cuCtxSetCurrent", ctx)
    cu("cuModuleLoad", ctypes.byref(module), args.module.encode())
    cu("cuStreamCreate", ctypes.byref(stream), CU_STREAM_NON_BLOCKING)
    status = train(args, cu, module, stream)
    cu("cuStreamDestroy_v2", stream)
    cu("cuModuleUnload", module)
    cu("cuDevicePrimaryCtxRelease_v2", dev)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except CudaError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        sys.exit(1)
