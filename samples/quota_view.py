#!/usr/bin/env python3
"""What a job sees of the GPU: devices, memory (cuMemGetInfo), and whether
allocations of the given sizes succeed. Standard library only (ctypes over
libcuda.so.1), so it runs the same under LD_PRELOAD=libvgpu.so.

usage: quota_view.py NAME [--alloc MiB ...] [--hold SECONDS]
"""
import argparse
import ctypes
import sys
import time


def check(cuda, r, what):
    if r != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(name))
        raise SystemExit(f"{what} failed: {name.value.decode()} ({r})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--alloc", type=int, nargs="*", default=[], help="sizes in MiB to try")
    p.add_argument("--hold", type=float, default=0, help="seconds to keep the memory")
    a = p.parse_args()
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda, cuda.cuInit(0), "cuInit")
    n = ctypes.c_int()
    check(cuda, cuda.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    for d in range(n.value):
        name = ctypes.create_string_buffer(96)
        cuda.cuDeviceGetName(name, 96, d)
        bus = ctypes.create_string_buffer(32)
        cuda.cuDeviceGetPCIBusId(bus, 32, d)
        print(f"[{a.name}] device {d}: {name.value.decode()} at {bus.value.decode()}")
    ctx = ctypes.c_void_p()
    check(cuda, cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
    check(cuda, cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    print(f"[{a.name}] memory: total {total.value >> 20} MiB, free {free.value >> 20} MiB")
    for mib in a.alloc:
        ptr = ctypes.c_uint64()
        r = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib << 20))
        print(f"[{a.name}] cuMemAlloc({mib} MiB): {'ok' if r == 0 else f'CUDA_ERROR_OUT_OF_MEMORY ({r})' if r == 2 else r}")
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    print(f"[{a.name}] memory: total {total.value >> 20} MiB, free {free.value >> 20} MiB")
    sys.stdout.flush()
    time.sleep(a.hold)


if __name__ == "__main__":
    main()
