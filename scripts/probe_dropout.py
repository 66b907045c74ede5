#!/usr/bin/env python3
"""What dropout costs on one GPU: fused attention with attention_dropout, and the residual
bias-dropout-add with hidden_dropout (session 33, issue 12).

Megatron-LM's defaults are --attention-dropout 0.1 and --hidden-dropout 0.1, and NeMo's
GPTConfig5B / GPTConfig20B keep them. lcm prices fused attention from dropout-free kernels and a
bias-dropout-add forward at 6 B per element whatever the dropout.

1. Attention: torch's scaled_dot_product_attention on its cuDNN backend (the fused attention
   Transformer Engine runs; the flash backend alongside where cuDNN refuses a case), causal,
   BF16, (batch, heads, seq, head dim) per shape, dropout_p 0 and 0.1, forward alone and
   forward + backward, median of interleaved rounds.
2. Bias-dropout-add: Megatron's fused training form (torch.compile: residual + dropout(x + bias))
   and the bias-free form on a tokens x hidden BF16 tensor at p 0 and 0.1, forward and forward +
   backward; the forward's bytes per element are 6 without dropout, 7 with its 1-byte mask.
Writes JSON to the path given; --shapes "b,h,s,d[,full];..." and --no-bda choose other cases.
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from probe_timing import interleaved_samples

ATTN = [  # batch, heads, seq, head dim: GPT3-20B at TP 2 (mbs 2), GPT3-5B (mbs 2), Llama-like 8K / 16K, d64
    (2, 24, 2048, 128), (2, 32, 2048, 128), (1, 32, 8192, 128), (1, 32, 16384, 128), (1, 64, 4096, 64),
]
BDA = [(4096, 6144), (8192, 4096), (16384, 4096)]
ROUNDS = 7
REPS = 10


def interleaved(fns):
    return {k: statistics.median(v) for k, v in interleaved_samples(fns, ROUNDS, REPS).items()}


# Megatron-Core's and Transformer Engine's jit_fuser is torch.compile from PyTorch 2.2 on
# (megatron/core/jit.py, transformer_engine/pytorch/jit.py): one Inductor kernel each way.
def _bda(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, prob: float) -> torch.Tensor:
    out = F.dropout(x + bias, p=prob, training=True)
    return residual + out


def _da(x: torch.Tensor, residual: torch.Tensor, prob: float) -> torch.Tensor:
    out = F.dropout(x, p=prob, training=True)
    return residual + out


bda_train = torch.compile(_bda)
da_train = torch.compile(_da)


def parse_args():
    """--shapes "b,h,s,d[,full];..." replaces the attention shapes (full: not causal);
    --no-bda skips the bias-dropout-add part."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--no-bda", action="store_true")
    a = ap.parse_args()
    shapes = []
    for item in filter(None, a.shapes.split(";")):
        f = item.split(",")
        shapes.append((int(f[0]), int(f[1]), int(f[2]), int(f[3]), len(f) < 5 or f[4] != "full"))
    return a, shapes


def main():
    args, shapes = parse_args()
    global ATTN, BDA
    ATTN = shapes or [(b, h, s, d, True) for (b, h, s, d) in ATTN]
    if args.no_bda:
        BDA = []
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "attention": [], "bda": []}
    for (b, h, s, d, causal) in ATTN:
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            row = {"batch": b, "heads": h, "seq": s, "head_dim": d, "causal": causal, "backend": name}
            try:
                def fwd(p):
                    with sdpa_kernel(backend), torch.no_grad():
                        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)

                def fb(p):
                    with sdpa_kernel(backend):
                        o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
                    o.backward(g)

                t = interleaved({"fwd0": lambda: fwd(0.0), "fwd1": lambda: fwd(0.1),
                                 "fb0": lambda: fb(0.0), "fb1": lambda: fb(0.1)})
                row.update({"fwd_us_p0": t["fwd0"], "fwd_us_p01": t["fwd1"], "fwdbwd_us_p0": t["fb0"],
                            "fwdbwd_us_p01": t["fb1"], "fwd_ratio": t["fwd1"] / t["fwd0"],
                            "bwd_ratio": (t["fb1"] - t["fwd1"]) / (t["fb0"] - t["fwd0"])})
                print(f"attn {name} b{b} h{h} s{s} d{d}: fwd {t['fwd0']:.0f} -> {t['fwd1']:.0f} us "
                      f"(x{row['fwd_ratio']:.3f}), bwd x{row['bwd_ratio']:.3f}", flush=True)
            except Exception as exc:  # a backend that refuses the case is recorded as such
                row["error"] = str(exc).splitlines()[0][:300]
                print(f"attn {name} b{b} h{h} s{s} d{d}: {row['error']}", flush=True)
            out["attention"].append(row)
            q.grad = k.grad = v.grad = None
        del q, k, v, g
        torch.cuda.empty_cache()
    for (t, hdim) in BDA:
        x = torch.randn(t, hdim, device=dev, dtype=torch.bfloat16, requires_grad=True)
        bias = torch.randn(hdim, device=dev, dtype=torch.bfloat16, requires_grad=True)
        res = torch.randn(t, hdim, device=dev, dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn(t, hdim, device=dev, dtype=torch.bfloat16)
        for _ in range(3):  # compilation (grad and no-grad graphs per p)
            for p in (0.0, 0.1):
                bda_train(x, bias, res, p).backward(gy)
                da_train(x, res, p).backward(gy)
                with torch.no_grad():
                    bda_train(x, bias, res, p)
                    da_train(x, res, p)
        torch.cuda.synchronize()

        def f(fn, p, bwd):
            def run():
                if bwd:
                    fn(p).backward(gy)
                else:
                    with torch.no_grad():
                        fn(p)
            return run

        bb = lambda p: bda_train(x, bias, res, p)
        da = lambda p: da_train(x, res, p)
        tt = interleaved({"bda_f0": f(bb, 0.0, False), "bda_f1": f(bb, 0.1, False), "bda_fb0": f(bb, 0.0, True),
                          "bda_fb1": f(bb, 0.1, True), "da_f0": f(da, 0.0, False), "da_f1": f(da, 0.1, False),
                          "da_fb0": f(da, 0.0, True), "da_fb1": f(da, 0.1, True)})
        el = t * hdim
        row = {"tokens": t, "hidden": hdim, **{k + "_us": v for k, v in tt.items()}}
        # Effective bytes per element at 6 B/el for the dropout-free forward (its measured rate).
        rate = 6 * el / (tt["da_f0"] * 1e-6)
        row["da_fwd_bytes_per_el_p01_at_p0_rate"] = tt["da_f1"] * 1e-6 * rate / el
        out["bda"].append(row)
        print(f"bda {t}x{hdim}: " + ", ".join(f"{k} {v:.0f}" for k, v in tt.items()) +
              f"; dropout fwd = {row['da_fwd_bytes_per_el_p01_at_p0_rate']:.2f} B/el at the p=0 rate", flush=True)
        del x, bias, res, gy
        torch.cuda.empty_cache()
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
