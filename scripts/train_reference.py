#!/usr/bin/env python3
"""PyTorch reference of `lcm-exec train` (dense GQA models).

  train_reference.py DUMP            rebuild the model from `lcm-exec train --dump DUMP`, run
                                     step 1's micro-batches forward/backward in fp32 and in bf16,
                                     compare the loss (relative error; targets 1e-3 fp32,
                                     1e-2 bf16) and every parameter's gradient (cosine >= 0.999)
                                     with the runner's; exit 1 when a target is missed.
  train_reference.py DUMP --bench    also time a plain PyTorch eager implementation of the same
                                     model (bf16, SDPA with the cuDNN backend): tokens/s.

The model mirrors executor/src/train/model.cpp: weights [out, in] (y = x W^T), QKV rows
[q | k | v], NeoX-style RoPE over the whole head with the runner's inverse frequencies,
RMSNorm (eps from the dump), SwiGLU fc1 rows [gate | up], untied or tied output layer over
the padded vocabulary with padded columns excluded from the loss, loss = sum of token losses
/ labelled tokens of the step.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


def load(dump: Path):
    cfg = json.loads((dump / "config.json").read_text())
    if any(cfg["moe_layer"]):
        sys.exit("train_reference.py: MoE layers are not rebuilt by this script yet (dense models only)")
    def tensors(index):
        out = {}
        for e in json.loads((dump / index).read_text()):
            a = np.fromfile(dump / e["file"], dtype=np.float32).reshape(e["shape"])
            out[e["name"]] = torch.from_numpy(a)
        return out
    return cfg, tensors("weights.json"), tensors("grads.json")


def rope(x, cos, sin):  # x [b, s, heads, d]; NeoX: pairs (i, i + d/2)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s_ = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)


def rmsnorm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def forward_loss(cfg, W, tokens, labels, cos, sin):
    b, s = cfg["micro_batch_size"], cfg["seq"]
    h, a, g, d, f = cfg["hidden"], cfg["heads"], cfg["groups"], cfg["head_dim"], cfg["ffn"]
    x = W["embedding"][tokens.view(b, s)]
    for l in range(cfg["layers"]):
        p = f"layers.{l}."
        n = rmsnorm(x, W[p + "attn_norm"], cfg["norm_eps"])
        qkv = n @ W[p + "attn.qkv"].t()
        q, k, v = qkv.split([a * d, g * d, g * d], dim=-1)
        q = rope(q.view(b, s, a, d), cos, sin).transpose(1, 2)
        k = rope(k.view(b, s, g, d), cos, sin).transpose(1, 2)
        v = v.reshape(b, s, g, d).transpose(1, 2)
        k = k.repeat_interleave(a // g, dim=1)
        v = v.repeat_interleave(a // g, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=cfg["softmax_scale"])
        x = x + o.transpose(1, 2).reshape(b, s, a * d) @ W[p + "attn.proj"].t()
        n = rmsnorm(x, W[p + "mlp_norm"], cfg["norm_eps"])
        gate, up = (n @ W[p + "mlp.fc1"].t()).split([f, f], dim=-1)
        x = x + (F.silu(gate) * up) @ W[p + "mlp.fc2"].t()
    n = rmsnorm(x, W["final_norm"], cfg["norm_eps"])
    out_w = W["embedding"] if cfg["tied_embeddings"] else W["output"]
    logits = (n @ out_w.t())[..., : cfg["vocab"]].float()
    return F.cross_entropy(logits.view(-1, cfg["vocab"]), labels.view(-1), ignore_index=-1, reduction="sum")


def run_reference(cfg, init, tokens, labels, dtype, dev):
    W = {k: v.to(dev).to(dtype).requires_grad_(True) for k, v in init.items()}
    inv = torch.tensor(cfg["rope_inv_freq"], dtype=torch.float64)
    ang = torch.arange(cfg["seq"], dtype=torch.float64)[:, None] * inv[None, :]
    cos = (ang.cos() * cfg["rope_mscale"]).to(dev).to(dtype)
    sin = (ang.sin() * cfg["rope_mscale"]).to(dev).to(dtype)
    T = cfg["micro_batch_size"] * cfg["seq"]
    total = torch.zeros((), dtype=torch.float64, device=dev)
    for mb in range(cfg["micro_batches"]):
        t = tokens[mb * T:(mb + 1) * T].to(dev)
        y = labels[mb * T:(mb + 1) * T].to(dev)
        loss = forward_loss(cfg, W, t, y, cos, sin) / cfg["valid_tokens"]
        loss.backward()
        total += loss.detach().double()
    return total.item(), {k: v.grad.float().cpu() for k, v in W.items()}


def compare(cfg, grads, loss, ref_grads, loss_tol, label):
    ok = True
    rel = abs(loss - cfg["loss"]) / max(1e-12, abs(loss))
    print(f"{label}: loss runner {cfg['loss']:.6f} reference {loss:.6f} relative error {rel:.2e} (target {loss_tol:g})")
    ok &= rel <= loss_tol
    worst = (2.0, "")
    for name, g in grads.items():
        r = ref_grads[name].flatten().double()
        x = g.flatten().double()
        cos = float((r @ x) / max(1e-30, r.norm() * x.norm())) if r.norm() > 0 or x.norm() > 0 else 1.0
        worst = min(worst, (cos, name))
        if cos < 0.999:
            print(f"  {name}: gradient cosine {cos:.5f} < 0.999")
            ok = False
    print(f"  worst gradient cosine {worst[0]:.6f} ({worst[1]})")
    return ok


def bench(cfg, init, dev, steps=10):
    """Plain PyTorch eager (bf16, SDPA cuDNN backend) training steps of the same model: tokens/s."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    W = {k: v.to(dev).to(torch.bfloat16).requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(W.values(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    inv = torch.tensor(cfg["rope_inv_freq"], dtype=torch.float64)
    ang = torch.arange(cfg["seq"], dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(dev).bfloat16(), ang.sin().to(dev).bfloat16()
    T = cfg["micro_batch_size"] * cfg["seq"]
    gen = torch.Generator(device=dev).manual_seed(0)
    times = []
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for step in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(cfg["micro_batches"]):
                t = torch.randint(0, cfg["vocab"], (T,), device=dev, generator=gen)
                loss = forward_loss(cfg, W, t, torch.roll(t, -1), cos, sin) / (T * cfg["micro_batches"])
                loss.backward()
            torch.nn.utils.clip_grad_norm_(W.values(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    med = float(np.median(times[2:] if len(times) > 4 else times))
    tps = T * cfg["micro_batches"] / med
    print(f"pytorch eager bf16 (SDPA cuDNN): median step {med:.4f} s, {tps:.0f} tokens/s")
    return tps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", type=Path)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--bench-steps", type=int, default=10)
    args = ap.parse_args()
    cfg, init, grads = load(args.dump)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = torch.from_numpy(np.fromfile(args.dump / "tokens.i32", dtype=np.int32).astype(np.int64))
    labels = torch.from_numpy(np.fromfile(args.dump / "labels.i32", dtype=np.int32).astype(np.int64))
    ok = True
    torch.backends.cuda.matmul.allow_tf32 = False
    loss32, g32 = run_reference(cfg, init, tokens, labels, torch.float32, dev)
    ok &= compare(cfg, grads, loss32, g32, 1e-3, "fp32 reference")
    loss16, g16 = run_reference(cfg, init, tokens, labels, torch.bfloat16, dev)
    ok &= compare(cfg, grads, loss16, g16, 1e-2, "bf16 reference")
    if args.bench:
        bench(cfg, init, dev, args.bench_steps)
    print("OK" if ok else "MISSED a target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
