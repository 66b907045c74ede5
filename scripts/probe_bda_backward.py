#!/usr/bin/env python3
"""Does the backward of Megatron's bias-dropout-add run a kernel when dropout is 0 and there is
no bias? (Session 31's evidence: the schedule then priced `attn.bda` / `mlp.bda` backwards at
twice their forward bytes; since session 32 it gives them none there, schedule_gen.hpp bda().)

For T x h bf16 activations, times the forward and the backward of
  out = residual + dropout(x [+ bias], p, training=True)
in eager PyTorch and under torch.compile (Megatron-Core's jit_fuser on PyTorch >= 2.2), for
p = 0 and 0.1, with and without a bias, and counts the CUDA kernels each backward launches
(torch.profiler). Prints one JSON line per case.

  probe_bda_backward.py [--tokens 16384] [--hidden 4096] [--reps 20]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


def bda(x, bias, residual, p: float):
    if bias is not None:
        x = x + bias
    return residual + F.dropout(x, p=p, training=True)


def kernels_and_ms(fn, reps):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return names, statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    T, h = a.tokens, a.hidden
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "T": T, "h": h}), flush=True)
    compiled = torch.compile(bda)
    for mode, f in (("eager", bda), ("compile", compiled)):
        for p in (0.0, 0.1):
            for with_bias in (False, True):
                x = torch.randn(T, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                r = torch.randn(T, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                bias = torch.randn(h, device="cuda", dtype=torch.bfloat16, requires_grad=True) if with_bias else None
                g = torch.randn(T, h, device="cuda", dtype=torch.bfloat16)
                leaves = [x, r] + ([bias] if with_bias else [])
                for _ in range(3):  # compile and warm up
                    torch.autograd.grad(f(x, bias, r, p), leaves, g)
                out_holder = {}

                def fwd():
                    out_holder["o"] = f(x, bias, r, p)

                fk, fms = kernels_and_ms(fwd, a.reps)
                # The backward alone (the forward outside the timed region), as gradients returned
                # (torch.autograd.grad), not accumulated into leaves' .grad: an activation in a
                # layer has no .grad to add into.
                def bwd_only():
                    torch.autograd.grad(out_holder["o"], leaves, g, retain_graph=True)
                fwd()
                bk, bms = kernels_and_ms(bwd_only, a.reps)
                print(json.dumps({"mode": mode, "p": p, "bias": with_bias, "fwd_kernels": len(fk), "fwd_ms": round(fms, 4),
                                  "bwd_kernels": len(bk), "bwd_ms": round(bms, 4),
                                  "bwd_kernel_names": sorted(set(n[:60] for n in bk))}), flush=True)


if __name__ == "__main__":
    main()
