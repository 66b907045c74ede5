#!/usr/bin/env python3
"""FP8 GEMM time with and without cuBLASLt's fast accumulation, on one GPU (session 33, issue 12).

Transformer Engine runs the forward GEMM of an FP8 linear with fast accumulation
(use_split_accumulator=False: the tensor cores' own accumulator for the whole k loop) and the
two backward GEMMs (dgrad, wgrad) without it (partial sums promoted to FP32 in the epilogue of
each k chunk); lcm-exec's FP8 GEMMs, which lcm's FP8 term is fitted on, set no
CUBLASLT_MATMUL_DESC_FAST_ACCUM and so run without it. This probe times both modes with
torch._scaled_mm (cuBLASLt, per-tensor scales, BF16 output) on the same operands, interleaved
round by round so clock and power drift hit both alike, after a sustained warm-up.
Operands rotate over sets larger than L2 (every call reads from HBM, as lcm-exec's do).
Writes JSON (per shape: median us per call in each mode and the ratio) to argv[1].
"""
import json
import statistics
import sys

import torch

# m, n, k of forward GEMMs: Llama 3.1 8B at 8K tokens (qkv, proj, fc1, fc2), Llama 3 70B at TP 4
# (qkv, fc1, fc2), squares, a Mixtral-like expert at 8K rows, a skinny and a small one.
SHAPES = [
    (8192, 6144, 4096), (8192, 4096, 4096), (8192, 28672, 4096), (8192, 4096, 14336),
    (8192, 2560, 8192), (8192, 14336, 8192), (8192, 8192, 7168),
    (4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (1024, 5760, 2880),
    (128, 4096, 4096), (2048, 2048, 2048),
]
CALLS = 40
ROUNDS = 7
L2 = torch.cuda.get_device_properties(0).L2_cache_size


def main():
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cublaslt": "torch._scaled_mm, per-tensor scales, bf16 out", "calls": CALLS, "rounds": ROUNDS,
           "points": []}
    one = torch.ones((), device=dev, dtype=torch.float32)
    # Sustained warm-up: 3 s of large FP8 GEMMs so the clocks settle at the power limit.
    a = torch.randn(8192, 8192, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(8192, 8192, device=dev).to(torch.float8_e4m3fn).t()
    t0 = torch.cuda.Event(enable_timing=True)
    t1 = torch.cuda.Event(enable_timing=True)
    t0.record()
    while True:
        for _ in range(20):
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        t1.record()
        t1.synchronize()
        if t0.elapsed_time(t1) > 3000:
            break
    del a, b
    for (m, n, k) in SHAPES:
        set_bytes = m * k + k * n + 2 * m * n
        sets = max(1, min(32, -(-2 * L2 // set_bytes)))
        A = [torch.randn(m, k, device=dev).to(torch.float8_e4m3fn) for _ in range(sets)]
        # column-major k x n (cuBLASLt's FP8 "TN" layout on Hopper): the transpose of n x k
        B = [torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t() for _ in range(sets)]

        def run(fast):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for i in range(CALLS):
                j = i % sets
                torch._scaled_mm(A[j], B[j], scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                 use_fast_accum=fast)
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1) * 1e3 / CALLS

        run(True), run(False)  # algorithm selection, first launches
        fast, precise = [], []
        for r in range(ROUNDS):
            order = (True, False) if r % 2 == 0 else (False, True)
            for f in order:
                (fast if f else precise).append(run(f))
        mf, mp = statistics.median(fast), statistics.median(precise)
        flops = 2.0 * m * n * k
        out["points"].append({"m": m, "n": n, "k": k, "sets": sets, "fast_us": mf, "precise_us": mp,
                              "precise_over_fast": mp / mf, "fast_tflops": flops / mf / 1e6,
                              "precise_tflops": flops / mp / 1e6})
        print(f"{m}x{n}x{k}: fast {mf:.1f} us ({flops / mf / 1e6:.0f} TFLOP/s), precise {mp:.1f} us "
              f"({flops / mp / 1e6:.0f}), precise/fast {mp / mf:.3f}", flush=True)
        del A, B
        torch.cuda.empty_cache()
    ratios = [p["precise_over_fast"] for p in out["points"]]
    out["median_precise_over_fast"] = statistics.median(ratios)
    print(f"median precise/fast {out['median_precise_over_fast']:.3f}")
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
