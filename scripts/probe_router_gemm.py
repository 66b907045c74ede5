#!/usr/bin/env python3
"""Router GEMMs through PyTorch, beside lcm-exec's (a development probe, issue 12).

lcm-exec's `bench moe` runs the router's forward as C[T x E] = X[T x h] W[E x h]^T with FP32
logits (cuBLASLt, the algorithm of the exact shape), and `lcm calibrate --compare` prices it as
a BF16 GEMM writing BF16 C, Megatron-Core's default (`moe_router_dtype` unset). On the H100 the
forwards over 128-160 experts run 9-15 % slower than that price in every held-out set
(validation/measured/h100/heldout17-21), while `bench gemm` (NN layout, BF16 C) shapes of the
same kind are within about 8 %. This probe times, on the same GPU and shapes, what separates
them:

  fwd_nn_bf16    X @ Wt, Wt [h x E] contiguous (bench gemm's layout), BF16 C
  fwd_tn_bf16    X @ W.t(), W [E x h] (torch.nn.functional.linear's layout), BF16 C
  fwd_tn_fp32    the same with FP32 C (torch.mm out_dtype=float32, where this torch has it):
                 Megatron-Core with moe_router_dtype fp32, and lcm-exec
  dgrad_bf16     dL [T x E] @ W -> [T x h], BF16 C (written once; lcm-exec accumulates)
  wgrad_bf16     X.t() @ dL -> [h x E], BF16 C

One GPU, sustained clocks (each point keeps the GPU busy for --warmup-ms first), operands
rotated over copies of at least 2 x 100 MB so that X is read from HBM as in a layer, CUDA
events per repetition, median. Output: JSON with every point's median microseconds.

With --gemms MxNxK,...: also one expert's GEMM of each shape (X @ W.t(), BF16 C), timed the
same way, to set beside lcm-exec's grouped-GEMM loop per expert.

usage: probe_router_gemm.py --out probe.json [--warmup-ms 300] [--reps 30] [--shapes T:E:h,...]
                            [--gemms MxNxK,...]
"""
import argparse
import sys

import torch

from jsonio import write_json_atomic
from probe_timing import sustained_median_us

# Router shapes (tokens, experts, hidden) of the H100 held-out sets' MoE layers.
DEFAULT_SHAPES = [
    (16384, 160, 5120), (24064, 160, 5120), (26624, 160, 5120),
    (26624, 128, 2880), (28160, 128, 2880), (34816, 128, 2880),
    (35840, 128, 2048), (45056, 128, 2048),
    (17408, 256, 7168), (18944, 256, 7168),
    (12800, 8, 4096), (15360, 8, 4096),
]
ROTATE_BYTES = 200 * 1024 * 1024


def has_out_dtype():
    a = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
    try:
        return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup-ms", type=float, default=300)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--shapes", default="", help="T:E:h,... (default: the held-out sets' routers)")
    ap.add_argument("--gemms", default="", help="MxNxK,...: single expert GEMMs, X @ W.t(), BF16 C")
    args = ap.parse_args()
    try:
        gemms = [tuple(int(v) for v in s.split("x")) for s in args.gemms.split(",")] if args.gemms else []
    except ValueError:
        sys.exit(f"probe_router_gemm.py: --gemms: expected MxNxK,... got {args.gemms!r}")
    shapes = DEFAULT_SHAPES
    if args.shapes:
        try:
            shapes = [tuple(int(v) for v in s.split(":")) for s in args.shapes.split(",")]
        except ValueError:
            sys.exit(f"probe_router_gemm.py: --shapes: expected T:E:h,... got {args.shapes!r}")
    dev = torch.cuda.get_device_name(0)
    fp32_out = has_out_dtype()
    print(f"# {dev}, torch {torch.__version__}, FP32-output mm: {fp32_out}", flush=True)
    print(f"# {'T x E x h':>18} {'fwd_nn_bf16':>12} {'fwd_tn_bf16':>12} {'fwd_tn_fp32':>12} {'dgrad_bf16':>11} {'wgrad_bf16':>11}  (us)")
    points = []
    g = torch.Generator(device="cuda").manual_seed(1)
    for T, E, h in shapes:
        copies = max(1, -(-ROTATE_BYTES // (T * h * 2)))
        xs = [torch.randn(T, h, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(copies)]
        dls = [torch.randn(T, E, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(copies)]
        w = torch.randn(E, h, device="cuda", dtype=torch.bfloat16, generator=g)
        wt = w.t().contiguous()
        variants = {
            "fwd_nn_bf16": [lambda x=x: torch.mm(x, wt) for x in xs],
            "fwd_tn_bf16": [lambda x=x: torch.mm(x, w.t()) for x in xs],
            "dgrad_bf16": [lambda d=d: torch.mm(d, w) for d in dls],
            "wgrad_bf16": [lambda x=x, d=d: torch.mm(x.t(), d) for x, d in zip(xs, dls)],
        }
        if fp32_out:
            variants["fwd_tn_fp32"] = [lambda x=x: torch.mm(x, w.t(), out_dtype=torch.float32) for x in xs]
        res = {name: sustained_median_us(fns, args.warmup_ms, args.reps) for name, fns in variants.items()}
        points.append({"tokens": T, "experts": E, "hidden": h, "copies": copies, "median_us": res})
        f = lambda k: f"{res[k]:12.1f}" if k in res else f"{'-':>12}"
        print(f"  {T:>7}x{E:>3}x{h:>5} {f('fwd_nn_bf16')} {f('fwd_tn_bf16')} {f('fwd_tn_fp32')} "
              f"{res['dgrad_bf16']:11.1f} {res['wgrad_bf16']:11.1f}", flush=True)
        del xs, dls
        torch.cuda.empty_cache()
    singles = []
    for M, N, K in gemms:
        copies = max(1, -(-ROTATE_BYTES // ((M * K + N * K) * 2)))
        xs = [torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(copies)]
        ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(copies)]
        us = sustained_median_us([lambda x=x, w=w: torch.mm(x, w.t()) for x, w in zip(xs, ws)], args.warmup_ms, args.reps)
        singles.append({"m": M, "n": N, "k": K, "copies": copies, "median_us": us})
        print(f"  gemm {M}x{N}x{K}: {us:.1f} us ({2e-6 * M * N * K / us:.0f} TFLOP/s)", flush=True)
        del xs, ws
        torch.cuda.empty_cache()
    out = {"device": dev, "torch": torch.__version__, "fp32_output_mm": fp32_out,
           "warmup_ms": args.warmup_ms, "reps": args.reps, "rotate_bytes": ROTATE_BYTES, "points": points,
           "gemms": singles}
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
