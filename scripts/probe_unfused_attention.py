#!/usr/bin/env python3
"""Unfused attention on one GPU, kernel for kernel as Megatron-Core runs it (session 34, issue 12).

`training.attention_backend: unfused` (Megatron's `--attention-backend unfused`, or
`--transformer-impl local`) runs Megatron-Core's DotProductAttention
(megatron/core/transformer/dot_product_attention.py): K and V repeated to every query head
(GQA), S = Q K^T by baddbmm (beta 0, alpha = 1/sqrt(d)), FusedScaleMaskSoftmax, dropout,
O = P V by bmm, O permuted to [s, b, h d]. This script runs that sequence with torch in
Megatron's layouts and times the forward and the backward (torch.autograd.grad: no gradient
accumulation kernels), median of interleaved rounds.

The softmax, as FusedScaleMaskSoftmax picks it (fused_softmax.py is_kernel_available):
- seq_kv <= 4096: Megatron's fused CUDA kernel (scaled_upper_triang_masked_softmax, from Apex
  or Megatron's fused kernels). The device machine has neither, so this script EMULATES it with
  one torch.compile (Inductor) kernel per direction that moves the same bytes: bf16 scores in,
  bf16 probabilities out; the backward reads the probabilities and their gradient and writes the
  scores' gradient. Labelled "fused (emulated)" in the output.
- seq_kv > 4096: the torch fallback as Megatron writes it (forward_torch_softmax with
  attention_softmax_in_fp32 = True): .float(), masked_fill_(causal mask, -10000), Softmax(-1),
  .bfloat16().

Writes an lcm-exec-style summary (benchmark, devices, points with time_us and an explicit
model_op carrying "unfused": true), which `lcm calibrate --compare --profile P FILE` prices.
Usage: probe_unfused_attention.py OUT.json [--cases "b,s,hq,hkv,dqk,dv,p;..."] [--rounds N]
"""
import argparse
import math
import statistics
import sys

import torch
import torch.nn.functional as F

from jsonio import write_json_atomic
from probe_timing import interleaved_samples
from unfused_attention_cases import CASES, case_name, point

# Megatron's FusedScaleMaskSoftmax: 16 < sk <= 4096 (what the probe runs; lcm's own copy of the limit
# is kFusedSoftmaxMaxKeys in model/include/lcm/model/ops.hpp)
FUSED_MAX_KEYS = 4096
ROUNDS = 7
REPS = 10


def interleaved(fns, rounds, reps):
    return {k: (statistics.median(v), min(v), max(v)) for k, v in interleaved_samples(fns, rounds, reps).items()}


def _fused_softmax(x):
    """Emulation of Megatron's scaled_upper_triang_masked_softmax: causal mask from indices,
    fp32 inside, bf16 in and out (Inductor fuses it into one kernel each way)."""
    sq, sk = x.shape[-2], x.shape[-1]
    i = torch.arange(sq, device=x.device).unsqueeze(1)
    j = torch.arange(sk, device=x.device).unsqueeze(0)
    y = x.float().masked_fill(j > i, float("-inf"))
    return torch.softmax(y, dim=-1).to(x.dtype)


# One compiled graph per shape and grad mode: the ten cases need more than dynamo's default of
# 8 recompiles, past which it runs the function eagerly (the first run's sixth case did).
for _name in ("recompile_limit", "cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 64)
fused_softmax = torch.compile(_fused_softmax, dynamic=False)
_masks = {}


def torch_softmax(scores):
    """Megatron's forward_torch_softmax with attention_softmax_in_fp32 (its default)."""
    sq, sk = scores.shape[-2], scores.shape[-1]
    if (sq, sk) not in _masks:  # get_default_causal_mask is lru-cached: built once
        _masks[(sq, sk)] = torch.triu(torch.ones((sq, sk), device="cuda"), diagonal=1).bool()
    x = scores.float()
    x.masked_fill_(_masks[(sq, sk)], -10000.0)
    probs = torch.nn.Softmax(dim=-1)(x)
    return probs.bfloat16()


def megatron_local_attention(q, k, v, b, s, hq, hkv, dqk, dv, p):
    """DotProductAttention.forward (Megatron-Core local), causal self-attention."""
    if hq // hkv > 1:
        k = k.repeat_interleave(hq // hkv, dim=2)
        v = v.repeat_interleave(hq // hkv, dim=2)
    q2 = q.reshape(s, b * hq, dqk)
    k2 = k.view(s, b * hq, dqk)
    buf = torch.empty((b * hq, s, s), dtype=q.dtype, device=q.device)  # Megatron's global buffer
    scores = torch.baddbmm(buf, q2.transpose(0, 1), k2.transpose(0, 1).transpose(1, 2), beta=0.0,
                           alpha=1.0 / math.sqrt(dqk))
    scores = scores.view(b, hq, s, s)
    if s <= FUSED_MAX_KEYS:
        probs = fused_softmax(scores.view(b * hq, s, s)).view(b, hq, s, s)
    else:
        probs = torch_softmax(scores)
    if p > 0:
        probs = F.dropout(probs, p=p, training=True)
    v2 = v.view(s, b * hq, dv)
    ctx = torch.bmm(probs.view(b * hq, s, s), v2.transpose(0, 1))
    ctx = ctx.view(b, hq, s, dv).permute(2, 0, 1, 3).contiguous()
    return ctx.view(s, b, hq * dv)


def profile_kernels(fwd, forward_graph, backward, iters=3):
    """GPU kernels of one forward and of one backward (the backward alone: its forward runs
    before the profiler starts), name and median duration in us over `iters` profiled calls."""
    from torch.profiler import ProfilerActivity, profile

    def kernels(fn, before=None):
        runs = []
        for _ in range(iters):
            arg = before() if before else None
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn(arg) if before else fn()
                torch.cuda.synchronize()
            evs = [e for e in prof.events() if e.device_type.name == "CUDA" and e.device_time > 0]
            evs.sort(key=lambda e: e.time_range.start)
            runs.append([(e.name, e.device_time) for e in evs])
        n = min(len(r) for r in runs)
        return [(runs[0][i][0], statistics.median(r[i][1] for r in runs)) for i in range(n)]

    return {"fwd": kernels(fwd), "bwd": kernels(backward, forward_graph)}


def check(q, k, v, b, s, hq, hkv, dqk, dv):
    """Against torch's math SDPA at dropout 0 (relative error of the output)."""
    with torch.no_grad():
        out = megatron_local_attention(q, k, v, b, s, hq, hkv, dqk, dv, 0.0).float()
        r = hq // hkv
        qq = q.permute(1, 2, 0, 3).float()
        kk = k.repeat_interleave(r, dim=2).permute(1, 2, 0, 3).float()
        vv = v.repeat_interleave(r, dim=2).permute(1, 2, 0, 3).float()
        ref = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True).permute(2, 0, 1, 3).reshape(s, b, hq * dv)
        return ((out - ref).norm() / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cases", default="")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--kernels", action="store_true",
                    help="also record each pass's GPU kernels with torch.profiler (extra.kernels, extra.kernel_sum_us): "
                         "their summed durations are the GPU time without the host's")
    a = ap.parse_args()
    cases = CASES
    if a.cases:
        cases = []
        for c in a.cases.split(";"):
            f = c.split(",")
            cases.append(tuple(int(x) for x in f[:6]) + (float(f[6]) if len(f) > 6 else 0.0,))
    torch.manual_seed(1234)
    dev = torch.cuda.get_device_name(0)
    points = []
    for (b, s, hq, hkv, dqk, dv, p) in cases:
        q = torch.randn(s, b, hq, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(s, b, hkv, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(s, b, hkv, dv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(s, b, hq * dv, device="cuda", dtype=torch.bfloat16)
        err = check(q, k, v, b, s, hq, hkv, dqk, dv)

        def fwd():
            with torch.no_grad():
                megatron_local_attention(q, k, v, b, s, hq, hkv, dqk, dv, p)

        def fwd_bwd():
            out = megatron_local_attention(q, k, v, b, s, hq, hkv, dqk, dv, p)
            torch.autograd.grad(out, (q, k, v), dout)

        # The forward under no_grad saves nothing; the timed forward of fwd_bwd runs the same
        # kernels (autograd only records), so backward = (forward + backward) - forward.
        t = interleaved({"fwd": fwd, "fwd_bwd": fwd_bwd}, a.rounds, a.reps)

        def forward_graph():
            return megatron_local_attention(q, k, v, b, s, hq, hkv, dqk, dv, p)

        def backward(out):
            torch.autograd.grad(out, (q, k, v), dout)

        kern = profile_kernels(fwd, forward_graph, backward) if a.kernels else None
        softmax = "fused (emulated)" if s <= FUSED_MAX_KEYS else "torch fp32"
        name = case_name((b, s, hq, hkv, dqk, dv, p))
        ok = err < 2e-2
        fwd_us, fwdbwd_us = t["fwd"][0], t["fwd_bwd"][0]
        for pas, med, lo, hi in (("fwd", fwd_us, t["fwd"][1], t["fwd"][2]),
                                 ("bwd", fwdbwd_us - fwd_us, t["fwd_bwd"][1] - fwd_us, t["fwd_bwd"][2] - fwd_us)):
            extra = {"softmax": softmax, "dropout_p": p, "rel_error_vs_sdpa": err, "fwd_bwd_us": fwdbwd_us}
            if kern is not None:
                extra["kernels"] = kern[pas]
                extra["kernel_sum_us"] = sum(d for _, d in kern[pas])
            points.append(point((b, s, hq, hkv, dqk, dv, p), pas, {"median": med, "p10": lo, "p90": hi}, ok, extra))
        print(f"{name}: softmax {softmax}, fwd {fwd_us:.1f} us, bwd {fwdbwd_us - fwd_us:.1f} us, "
              f"rel err {err:.2e}", file=sys.stderr)
        del q, k, v, dout
        torch.cuda.empty_cache()
    doc = {"benchmark": "unfused-attention", "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": dev, "points": points}
    write_json_atomic(a.out, doc)


if __name__ == "__main__":
    main()
