#!/usr/bin/env python3
"""Unmodified PyTorch (its own cudart, cuBLAS and caching allocator) under
LD_PRELOAD=libvgpu.so on a real GPU: the checks only a real driver can run.
Started by scripts/gpu_validate.sh; prints one "RESULT <name> ok|FAIL ..." line
per check and exits non-zero if any failed.

  quota LIMIT_BYTES    the quota is what torch sees and what it can allocate
  rate SECONDS [N]     NxN matmul TFLOP/s for SECONDS (the compute-share runs)
  hold MIB STOPFILE    keeps MIB of known data on the GPU and computes on it
                       until STOPFILE exists (vgpuctl suspend/resume/checkpoint
                       run meanwhile), then checks the data
"""
import os
import sys
import time

import torch

failed = []


def result(name, ok, detail=""):
    print(f"RESULT {name} {'ok' if ok else 'FAIL'} {detail}", flush=True)
    if not ok:
        failed.append(name)


def quota(limit):
    free, total = torch.cuda.mem_get_info()
    result("torch.mem_get_info_total_is_quota", total == limit, f"total={total} limit={limit}")
    a = torch.empty(limit // 2, dtype=torch.uint8, device="cuda")
    try:
        b = torch.empty(limit * 3 // 4, dtype=torch.uint8, device="cuda")
        result("torch.over_quota_refused", False, f"allocated {b.numel()} more bytes")
    except torch.OutOfMemoryError as e:
        result("torch.over_quota_refused", True, str(e).splitlines()[0][:160])
    del a
    torch.cuda.empty_cache()
    # Within the quota again: cuBLAS and elementwise kernels give the CPU's answer.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 1024, generator=g, dtype=torch.float64)
    y = torch.randn(1024, 1024, generator=g, dtype=torch.float64)
    err = ((x.cuda() @ y.cuda()).cpu() - x @ y).abs().max().item()
    result("torch.matmul_matches_cpu", err < 1e-9, f"max_abs_err={err:.3g}")
    big = torch.empty(limit * 3 // 4, dtype=torch.uint8, device="cuda")
    result("torch.allocation_after_freeing", big.numel() == limit * 3 // 4)


def rate(seconds, n=8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    iters, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        iters += 10
    dt = time.perf_counter() - t0
    print(f"RATE tflops={2 * n ** 3 * iters / dt / 1e12:.1f} iters={iters} seconds={dt:.2f}", flush=True)


def checksum(data):  # in pieces: a whole int64 copy would be 8 times the data
    return sum(c.to(torch.int64).sum().item() for c in data.split(256 << 20))


def hold(mib, stop):
    n = mib << 20
    g = torch.Generator(device="cuda").manual_seed(7)
    data = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda", generator=g)
    want = checksum(data)
    w = torch.randn(2048, 2048, device="cuda")
    ref = (w @ w).sum().item()
    print(f"ready pid={os.getpid()} sum={want}", flush=True)
    iters, worst_gap, last = 0, 0.0, time.perf_counter()
    while not os.path.exists(stop):
        got = (w @ w).sum().item()  # blocks while vgpud or vgpuctl holds the job suspended
        now = time.perf_counter()
        worst_gap, last = max(worst_gap, now - last), now
        if abs(got - ref) > 1e-3 * abs(ref) + 1e-3:
            result("torch.hold_compute_stable", False, f"iteration {iters}: {got} != {ref}")
            break
        iters += 1
        time.sleep(0.01)
    got = checksum(data)
    result("torch.hold_data_intact", got == want, f"sum={got} want={want} iterations={iters} "
           f"longest_pause_s={worst_gap:.2f}")


def main():
    mode = sys.argv[1]
    if mode == "quota":
        quota(int(sys.argv[2]))
    elif mode == "rate":
        rate(float(sys.argv[2]), *(int(a) for a in sys.argv[3:4]))
    elif mode == "hold":
        hold(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
