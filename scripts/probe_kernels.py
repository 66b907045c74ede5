#!/usr/bin/env python3
"""Kernel-level measurements behind the time model's curve parameters (hwprofiles/*.yaml,
`efficiency:` block; docs/hardware-profiles.md says which number comes from which point).

One GPU, PyTorch only, sustained clocks (a 3 s warm-up, then every point keeps the GPU busy
for at least --warmup-ms before its timed repetitions, as lcm-exec does for GEMMs: the H200
here is power-limited and its SM clock falls within a fraction of a second under load).
CUDA events around every repetition, median reported.

  attention  torch SDPA with the cuDNN backend (what Transformer Engine runs on Hopper) and
             the flash backend (FlashAttention-2), bf16, causal and not, head dim 64 / 128,
             GQA 4:1, sequence 1K-32K at 32K tokens per call: forward and forward+backward
             TFLOP/s in the FlashAttention convention (fwd 4*b*s^2*h*d, /2 causal; bwd 2.5x).
  gemm       torch.matmul bf16 and torch._scaled_mm fp8 (e4m3, per-tensor scales) over
             sweeps of one small dimension and real-model shapes (MoE experts, MLA).
  grouped    torch._grouped_mm bf16 (where this torch has it): expert GEMMs as one launch.
  membw      memory-bound kernels of a layer: RMSNorm, SwiGLU, residual add, bf16->fp8 cast
             (+ transpose), effective GB/s counting bytes read + written.

usage: probe_kernels.py --out probe.json [--warmup-ms 250] [--reps 20] [--quick]
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

from jsonio import write_json_atomic
from probe_timing import sustained_median_us


def timed(fn, warmup_ms, reps):
    """Median ms of fn() after keeping the GPU busy for warmup_ms."""
    return sustained_median_us(fn, warmup_ms, reps) / 1e3


def clocks():
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        }
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}


def parse_attention_shape(text):
    """`d128/hq32/hkv8/causal/s4096[/b8]` (or `full` for no mask) -> (d, hq, hkv, causal, s, b);
    the batch defaults to 32768 tokens per call (at least 1)."""
    parts = text.strip().split("/")
    if len(parts) not in (5, 6) or parts[3] not in ("causal", "full"):
        raise SystemExit(f"--attention-shapes: '{text}': expected dD/hqQ/hkvK/causal|full/sS[/bB]")
    try:
        d, hq, hkv = int(parts[0][1:]), int(parts[1][2:]), int(parts[2][3:])
        s = int(parts[4][1:])
        b = int(parts[5][1:]) if len(parts) == 6 else max(1, 32768 // s)
    except ValueError:
        raise SystemExit(f"--attention-shapes: '{text}': expected dD/hqQ/hkvK/causal|full/sS[/bB]")
    return d, hq, hkv, parts[3] == "causal", s, b


def attention(args, out):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tokens = 32768
    seqs = [1024, 2048, 4096, 8192, 16384, 32768] if not args.quick else [2048, 8192]
    grid = [(d, hq, hkv, causal, s, max(1, tokens // s)) for d, hq, hkv in ((128, 32, 32), (128, 32, 8), (64, 32, 32))
            for causal in (True, False) for s in seqs]
    if args.attention_shapes:
        grid = [parse_attention_shape(x) for x in args.attention_shapes.split(",")]
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    for backend_name in args.attention_backends.split(","):
        if backend_name not in backends:
            raise SystemExit(f"--attention-backends: '{backend_name}': expected cudnn or flash")
        backend = backends[backend_name]
        for d, hq, hkv, causal, s, b in grid:
            q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            go = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16)
            gqa = hq != hkv
            rec = {"kind": "attention", "backend": backend_name, "head_dim": d, "heads_q": hq,
                   "heads_kv": hkv, "causal": causal, "seq": s, "batch": b}
            flops_fwd = 4.0 * b * s * s * hq * d / (2.0 if causal else 1.0)
            try:
                with sdpa_kernel([backend]):
                    def fwd():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

                    def fwdbwd():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                        o.backward(go)

                    with torch.no_grad():
                        tf = timed(fwd, args.warmup_ms, args.reps)
                    tfb = timed(fwdbwd, args.warmup_ms, args.reps)
                tb = max(tfb - tf, 1e-6)
                rec.update(fwd_ms=tf, fwdbwd_ms=tfb, bwd_ms=tb, fwd_tflops=flops_fwd / tf / 1e9,
                           bwd_tflops=2.5 * flops_fwd / tb / 1e9, fwdbwd_tflops=3.5 * flops_fwd / tfb / 1e9)
            except Exception as e:  # noqa: BLE001
                rec["error"] = str(e).splitlines()[0][:200]
            rec.update(clocks())
            out.append(rec)
            print(json.dumps(rec), flush=True)
            del q, k, v, go
            q = k = v = go = None
            torch.cuda.empty_cache()


def gemm_shapes(quick):
    shapes = []
    big = 8192
    for d in (128, 256, 512, 768, 1024, 1536, 2048, 4096, 8192):
        shapes.append(("k-sweep", big, big, d))
        shapes.append(("n-sweep", big, d, big))
        shapes.append(("m-sweep", d, big, big))
    # Real-model shapes (m = tokens, n = out features, k = in features).
    shapes += [
        ("qwen3-30b.expert-fc1", 4096, 1536, 2048), ("qwen3-30b.expert-fc2", 4096, 2048, 768),
        ("qwen3-30b.qkv", 4096, 5120, 2048), ("qwen3-30b.proj", 4096, 2048, 4096),
        ("deepseek.expert-fc1", 8192, 4096, 7168), ("deepseek.expert-fc2", 8192, 7168, 2048),
        ("deepseek.q_down", 4096, 1536, 7168), ("deepseek.kv_down", 4096, 576, 7168),
        ("deepseek.kv_up/tp2", 4096, 16384, 512), ("deepseek.q_up/tp2", 4096, 12288, 1536),
        ("gpt-oss.expert-fc1", 4096, 5760, 2880), ("gpt-oss.expert-fc2", 4096, 2880, 2880),
        ("llama3-70b.fc1/tp4", 8192, 14336, 8192), ("llama3-70b.fc2/tp4", 8192, 8192, 7168),
        ("llama3-70b.qkv/tp4", 8192, 2560, 8192), ("llama3-8b.logits", 8192, 128256, 4096),
        ("gpt-1.7b.fc1", 16384, 8192, 2048), ("gpt-1.7b.qkv", 16384, 6144, 2048),
    ]
    if quick:
        shapes = shapes[::4]
    return shapes


def gemm(args, out):
    scale_a = torch.tensor(0.5, device="cuda")
    scale_b = torch.tensor(0.25, device="cuda")
    for label, m, n, k in gemm_shapes(args.quick):
        for dtype in ("bf16", "fp8"):
            rec = {"kind": "gemm", "label": label, "dtype": dtype, "m": m, "n": n, "k": k}
            try:
                a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
                if dtype == "bf16":
                    bmat = torch.rand(k, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
                    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                    fn = lambda: torch.matmul(a, bmat, out=c)  # noqa: E731
                else:
                    a8 = a.to(torch.float8_e4m3fn)
                    w8 = (torch.rand(n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1).to(torch.float8_e4m3fn)
                    fn = lambda: torch._scaled_mm(a8, w8.t(), scale_a=scale_a, scale_b=scale_b,  # noqa: E731
                                                  out_dtype=torch.bfloat16)
                t = timed(fn, args.warmup_ms, args.reps)
                rec.update(ms=t, tflops=2.0 * m * n * k / t / 1e9)
            except Exception as e:  # noqa: BLE001
                rec["error"] = str(e).splitlines()[0][:200]
            rec.update(clocks())
            out.append(rec)
            print(json.dumps(rec), flush=True)
            torch.cuda.empty_cache()


def grouped(args, out):
    if not hasattr(torch, "_grouped_mm"):
        out.append({"kind": "grouped", "error": "torch._grouped_mm not available"})
        return
    cases = [("qwen3-30b.fc1 x8", 8, 4096, 1536, 2048), ("qwen3-30b.fc2 x8", 8, 4096, 2048, 768),
             ("deepseek.fc1 x4", 4, 8192, 4096, 7168), ("deepseek.fc2 x4", 4, 8192, 7168, 2048),
             ("mixtral-proxy.fc1 x1", 1, 8192, 14336, 4096), ("deepseek-proxy.fc1 x4", 4, 8192, 2048, 7168),
             ("qwen3-235b.fc1 x4", 4, 4096, 3072, 4096), ("gpt-oss.fc1 x16", 16, 1024, 5760, 2880)]
    for label, g, mg, n, k in cases:
        rec = {"kind": "grouped", "label": label, "groups": g, "m_per_group": mg, "n": n, "k": k, "dtype": "bf16"}
        try:
            a = torch.rand(g * mg, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
            w = torch.rand(g, n, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
            offs = torch.arange(mg, g * mg + 1, mg, device="cuda", dtype=torch.int32)
            fn = lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)  # noqa: E731
            t = timed(fn, args.warmup_ms, args.reps)
            rec.update(ms=t, tflops=2.0 * g * mg * n * k / t / 1e9)
        except Exception as e:  # noqa: BLE001
            rec["error"] = str(e).splitlines()[0][:200]
        out.append(rec)
        print(json.dumps(rec), flush=True)
        torch.cuda.empty_cache()


def membw(args, out):
    T, h = 16384, 4096
    x = torch.randn(T, h, device="cuda", dtype=torch.bfloat16)
    r = torch.randn(T, h, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(h, device="cuda", dtype=torch.bfloat16)
    gate = torch.randn(T, 14336, device="cuda", dtype=torch.bfloat16)
    up = torch.randn(T, 14336, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    cases = [
        ("copy", lambda: r.copy_(x), 2 * 2 * T * h),
        ("add", lambda: torch.add(x, r, out=r), 3 * 2 * T * h),
        ("rms_norm", lambda: F.rms_norm(x, (h,), w), 2 * 2 * T * h),
        ("layer_norm", lambda: F.layer_norm(x, (h,), w, None), 2 * 2 * T * h),
        ("swiglu", lambda: F.silu(gate) * up, 3 * 2 * T * 14336),
        ("gelu", lambda: F.gelu(gate), 2 * 2 * T * 14336),
        ("cast_fp8", lambda: big.to(torch.float8_e4m3fn), 3 * 8192 * 8192),
        ("amax", lambda: big.abs().amax(), 2 * 2 * 8192 * 8192),
        ("cast_fp8_transpose", lambda: big.t().contiguous().to(torch.float8_e4m3fn), (2 + 2 + 2 + 1) * 8192 * 8192),
    ]
    for label, fn, nbytes in cases:
        rec = {"kind": "membw", "label": label, "bytes": nbytes}
        try:
            t = timed(fn, args.warmup_ms, args.reps)
            rec.update(ms=t, gbps=nbytes / t / 1e6)
        except Exception as e:  # noqa: BLE001
            rec["error"] = str(e).splitlines()[0][:200]
        out.append(rec)
        print(json.dumps(rec), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--warmup-ms", type=float, default=250)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="membw,gemm,grouped,attention")
    p.add_argument("--attention-shapes", default="",
                   help="comma list of dD/hqQ/hkvK/causal|full/sS[/bB] (default: the probe's grid)")
    p.add_argument("--attention-backends", default="cudnn,flash", help="comma list of cudnn, flash")
    args = p.parse_args()
    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "args": vars(args)}
    print(json.dumps(meta), flush=True)
    # Global warm-up: 3 s of large bf16 GEMMs so the power-limited clock settles.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    timed(lambda: a @ a, 3000, 5)
    del a
    out = []
    t0 = time.time()
    for part in args.only.split(","):
        {"attention": attention, "gemm": gemm, "grouped": grouped, "membw": membw}[part](args, out)
        print(f"# {part} done at {time.time() - t0:.0f} s", flush=True)
    write_json_atomic(args.out, {"meta": meta, "points": out})


if __name__ == "__main__":
    sys.exit(main())
