#!/usr/bin/env python3
"""PyTorch reference of `lcm-exec train` (dense GQA or MLA attention, qk-layernorm, MoE models).

  train_reference.py DUMP            rebuild the model from `lcm-exec train --dump DUMP`, run
                                     step 1's micro-batches forward/backward in fp32 and in bf16,
                                     compare the loss (relative error; targets 1e-3 fp32,
                                     1e-2 bf16) and every parameter's gradient (cosine >= 0.999)
                                     with the runner's; exit 1 when a target is missed.
  train_reference.py DUMP --bench    also time a plain PyTorch eager implementation of the same
                                     model (bf16, SDPA with the cuDNN backend): tokens/s.
  train_reference.py DUMP --bench-only   only that timing (no numerics check).

The model mirrors executor/src/train/model.cpp: weights [out, in] (y = x W^T), QKV rows
[q | k | v], qk-layernorm (RMSNorm of each head of Q and K, before RoPE) when config.json
says "qk_norm", multi-latent attention when it has an "mla" section (mla_qkv below),
NeoX-style RoPE over the whole head (MLA: the qk_rope channels) with the runner's inverse frequencies,
RMSNorm (eps from the dump), SwiGLU fc1 rows [gate | up], untied or tied output layer over
the padded vocabulary with padded columns excluded from the loss, loss = sum of token losses
/ labelled tokens of the step.

MoE layers (config.json "moe", executor/src/train/moe_block.cpp) follow Megatron's
topk_softmax_with_capacity: fp32 router logits x W_r^T; softmax scores: top-k of the logits
(group-limited: groups ranked by the sum of their top k/group_topk logits), gates = softmax
over the selected logits; sigmoid scores: s = sigmoid(logits), selection on s + expert bias
(the bias takes no gradient), gates = s of the selected / (their sum + 1e-20) when k > 1.
Capacity (the runner's per-micro-batch value, Megatron's get_capacity) with the "probs" drop
policy (per expert, its `capacity` highest-gate tokens) or "position" (its first tokens);
dropped pairs contribute nothing. Experts: SwiGLU fc1 [E, 2f, h] (rows [gate | up]) and fc2
[E, h, f]; output = sum of the kept gates x expert outputs, plus the shared expert (fc1
[2 fs, h], fc2 [h, fs]) on every token. Aux loss (switch_load_balancing_loss_func):
coeff E / (k T^2) sum_e count_e sum_t p_te, counts from the plain top-k of the scores (no
bias, no groups; constants), p the softmax over all logits or the sigmoid scores normalised
per token; z-loss: coeff mean_t logsumexp_t^2. The gradient objective is the runner's: the
language-model loss plus both losses / micro-batches for every MoE layer and micro-batch; the
runner's logged aux value (their plain sum) is compared like the loss.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


def load(dump: Path, with_grads=True):
    cfg = json.loads((dump / "config.json").read_text())
    if any(cfg["moe_layer"]) and "moe" not in cfg:
        sys.exit("train_reference.py: the dump has MoE layers but no \"moe\" section (an older lcm-exec)")
    shapes = moe_shapes(cfg)
    def tensors(index):
        out = {}
        for e in json.loads((dump / index).read_text()):
            a = np.fromfile(dump / e["file"], dtype=np.float32)
            shape = next((v for k, v in shapes.items() if e["name"].endswith(k)), e["shape"])
            out[e["name"]] = torch.from_numpy(a.reshape(shape))
        return out
    return cfg, tensors("weights.json"), tensors("grads.json") if with_grads else None


def moe_shapes(cfg):
    """The MoE block's flat parameters as matrices (moe_block.cpp's layouts)."""
    if "moe" not in cfg:
        return {}
    m, h = cfg["moe"], cfg["hidden"]
    E, f, fs = m["experts"], m["expert_ffn"], m["shared_ffn"]
    return {"moe.router": [E, h], "moe.experts.fc1": [E, 2 * f, h], "moe.experts.fc2": [E, h, f],
            "moe.shared.fc1": [2 * fs, h], "moe.shared.fc2": [h, fs], "moe.expert_bias": [E]}


def topk_lower_first(scores, k):
    """Top-k per row, best first, ties to the lower index (the runner's rule)."""
    # A stable sort keeps equal scores in index order, descending or not.
    return torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]


def route(cfg, logits, bias, given=None):
    """Indices [T, k], gate weights [T, k] (differentiable) and the kept mask [T, k].
    `given` (the runner's assignments of this call, -1 - expert where dropped) replaces the
    selection and the drops; the gate weights are still computed here."""
    m = cfg["moe"]
    E, k, G, gk = m["experts"], m["topk"], m["groups"], m["group_topk"]
    sigmoid = m["score"] == "sigmoid"
    scores = torch.sigmoid(logits) if sigmoid else logits
    if given is not None:
        idx = torch.where(given >= 0, given, -1 - given).long()
        sel = scores.gather(1, idx)
        if sigmoid:
            gates = sel / (sel.sum(-1, keepdim=True) + 1e-20) if k > 1 else sel
        else:
            gates = torch.softmax(sel, dim=-1)
        return idx, gates, given >= 0
    key = (scores + bias.float() if bias is not None else scores).detach()
    if G > 0:
        T = key.shape[0]
        per = E // G
        group_score = key.view(T, G, per).topk(k // gk, dim=-1).values.sum(-1)
        groups = topk_lower_first(group_score, gk)
        allowed = torch.zeros(T, G, dtype=torch.bool, device=key.device).scatter_(1, groups, True)
        key = key.masked_fill(~allowed.repeat_interleave(per, dim=1), float("-inf"))
    idx = topk_lower_first(key, k)
    sel = scores.gather(1, idx)
    if sigmoid:
        gates = sel / (sel.sum(-1, keepdim=True) + 1e-20) if k > 1 else sel
    else:
        gates = torch.softmax(sel, dim=-1)
    kept = torch.ones_like(idx, dtype=torch.bool)
    cap = m["capacity"]
    if cap >= 0:
        T = idx.shape[0]
        dense = torch.zeros(T, E, device=idx.device).scatter(1, idx, gates.detach().float())
        routed = torch.zeros(T, E, dtype=torch.bool, device=idx.device).scatter_(1, idx, True)
        if m["drop_policy"] == "position":
            keep = routed & (routed.long().cumsum(0) <= cap)
        else:  # probs: per expert its `cap` highest gates among the tokens routed to it
            ranked = dense.masked_fill(~routed, -1.0)
            top = ranked.topk(min(cap, T), dim=0).indices
            keep = routed & torch.zeros(T, E, dtype=torch.bool, device=idx.device).scatter_(0, top, True)
        kept = keep.gather(1, idx)
    return idx, gates, kept


def moe_layer(cfg, W, p, x, given=None):
    """The MoE block on x [T, h] (bf16 or fp32): (output, aux + z loss of this call)."""
    m = cfg["moe"]
    E, k, f, fs = m["experts"], m["topk"], m["expert_ffn"], m["shared_ffn"]
    T = x.shape[0]
    logits = x.float() @ W[p + "moe.router"].float().t()
    bias = W.get(p + "moe.expert_bias") if m["expert_bias"] else None
    idx, gates, kept = route(cfg, logits, bias, given)
    y = torch.zeros_like(x, dtype=torch.float32)
    for e in range(E):
        t, j = torch.nonzero((idx == e) & kept, as_tuple=True)
        if t.numel() == 0:
            continue
        gate, up = (x[t] @ W[p + "moe.experts.fc1"][e].t()).split([f, f], dim=-1)
        out = (F.silu(gate) * up) @ W[p + "moe.experts.fc2"][e].t()
        y = y.index_add(0, t, out.float() * gates[t, j].float()[:, None])
    y = y.to(x.dtype)
    if fs > 0:
        gate, up = (x @ W[p + "moe.shared.fc1"].t()).split([fs, fs], dim=-1)
        y = y + (F.silu(gate) * up) @ W[p + "moe.shared.fc2"].t()
    extra = torch.zeros((), dtype=torch.float32, device=x.device)
    if m["aux_loss_coeff"] > 0:
        if m["score"] == "sigmoid":
            s = torch.sigmoid(logits)
            probs = s / (s.sum(-1, keepdim=True) + 1e-20)
        else:
            probs = torch.softmax(logits, dim=-1)
        plain = topk_lower_first(logits.detach(), k)  # both scores are monotone in the logits
        counts = torch.zeros(E, device=x.device).index_add_(0, plain.flatten(), torch.ones(plain.numel(), device=x.device))
        extra = extra + m["aux_loss_coeff"] * E / (k * T * T) * (probs.sum(0) * counts).sum()
    if m["z_loss_coeff"] > 0:
        extra = extra + m["z_loss_coeff"] * torch.logsumexp(logits, dim=-1).pow(2).mean()
    return y, extra


def rope(x, cos, sin):  # x [b, s, heads, d]; NeoX: pairs (i, i + d/2)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s_ = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)


def rmsnorm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def mla_qkv(cfg, W, p, n, cos, sin):
    """Multi-latent attention's Q, K, V [b, heads, s, *] (Megatron's multi_latent_attention.py
    at tp 1): q = q_up(q_norm(q_down(n))) (or q(n) without q-LoRA); [kv latent | k_pe] =
    kv_down(n); [k_nope | v] per head = kv_up(kv_norm(kv latent)); RoPE (NeoX) on the last
    qk_rope channels of each query head and on the shared k_pe; K = [k_nope | k_pe]."""
    m = cfg["mla"]
    b, s, a = n.shape[0], n.shape[1], cfg["heads"]
    dn, dr, dv, ql, kl = m["qk_nope"], m["qk_rope"], m["v_dim"], m["q_lora"], m["kv_lora"]
    eps, qk = cfg["norm_eps"], cfg["qk_norm"]
    if ql > 0:
        lat = n @ W[p + "attn.q_down"].t()
        if qk:
            lat = rmsnorm(lat, W[p + "attn.q_norm"], eps)
        q = lat @ W[p + "attn.q_up"].t()
    else:
        q = n @ W[p + "attn.q"].t()
    kvl, kpe = (n @ W[p + "attn.kv_down"].t()).split([kl, dr], dim=-1)
    if qk:
        kvl = rmsnorm(kvl, W[p + "attn.kv_norm"], eps)
    kv = (kvl @ W[p + "attn.kv_up"].t()).view(b, s, a, dn + dv)
    k_nope, v = kv.split([dn, dv], dim=-1)
    q_nope, q_pe = q.view(b, s, a, dn + dr).split([dn, dr], dim=-1)
    q = torch.cat([q_nope, rope(q_pe, cos, sin)], dim=-1)
    kpe = rope(kpe.view(b, s, 1, dr), cos, sin).expand(b, s, a, dr)
    k = torch.cat([k_nope, kpe], dim=-1)
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def forward_loss(cfg, W, tokens, labels, cos, sin, routing=None):
    b, s = cfg["micro_batch_size"], cfg["seq"]
    h, a, g, d, f = cfg["hidden"], cfg["heads"], cfg["groups"], cfg["head_dim"], cfg["ffn"]
    dv = cfg["mla"]["v_dim"] if "mla" in cfg else d
    x = W["embedding"][tokens.view(b, s)]
    aux = torch.zeros((), dtype=torch.float32, device=x.device)  # MoE aux + z losses of this micro-batch
    for l in range(cfg["layers"]):
        p = f"layers.{l}."
        n = rmsnorm(x, W[p + "attn_norm"], cfg["norm_eps"])
        if "mla" in cfg:
            q, k, v = mla_qkv(cfg, W, p, n, cos, sin)
        else:
            qkv = n @ W[p + "attn.qkv"].t()
            q, k, v = qkv.split([a * d, g * d, g * d], dim=-1)
            q, k = q.view(b, s, a, d), k.view(b, s, g, d)
            if cfg.get("qk_norm"):  # per-head RMSNorm of Q and K before RoPE
                q = rmsnorm(q, W[p + "attn.q_norm"], cfg["norm_eps"])
                k = rmsnorm(k, W[p + "attn.k_norm"], cfg["norm_eps"])
            q = rope(q, cos, sin).transpose(1, 2)
            k = rope(k, cos, sin).transpose(1, 2)
            v = v.reshape(b, s, g, d).transpose(1, 2)
            k = k.repeat_interleave(a // g, dim=1)
            v = v.repeat_interleave(a // g, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=cfg["softmax_scale"])
        x = x + o.transpose(1, 2).reshape(b, s, a * dv) @ W[p + "attn.proj"].t()
        n = rmsnorm(x, W[p + "mlp_norm"], cfg["norm_eps"])
        if cfg["moe_layer"][l]:
            y, extra = moe_layer(cfg, W, p, n.reshape(b * s, h), routing.get(l) if routing else None)
            x = x + y.view(b, s, h)
            aux = aux + extra
        else:
            gate, up = (n @ W[p + "mlp.fc1"].t()).split([f, f], dim=-1)
            x = x + (F.silu(gate) * up) @ W[p + "mlp.fc2"].t()
    n = rmsnorm(x, W["final_norm"], cfg["norm_eps"])
    out_w = W["embedding"] if cfg["tied_embeddings"] else W["output"]
    logits = (n @ out_w.t())[..., : cfg["vocab"]].float()
    ce = F.cross_entropy(logits.view(-1, cfg["vocab"]), labels.view(-1), ignore_index=-1, reduction="sum")
    return ce, aux


def routing_of(cfg, mb, dev):
    """The runner's assignments of micro-batch mb per MoE layer (routing.l<L>.mb<mb>.i32 of
    the dump, [tokens, topk], -1 - expert where dropped): top-k choices and drops are discrete,
    so near-ties that bf16 and fp32 break differently would make the gradients of whole
    tokens differ; the reference replays the runner's choices and computes everything else."""
    if "moe" not in cfg or "dump_dir" not in cfg:
        return None
    out = {}
    for l, moe in enumerate(cfg["moe_layer"]):
        f = Path(cfg["dump_dir"]) / f"routing.l{l}.mb{mb}.i32"
        if moe and f.exists():
            out[l] = torch.from_numpy(np.fromfile(f, dtype=np.int32).astype(np.int64)).view(-1, cfg["moe"]["topk"]).to(dev)
    return out


def run_reference(cfg, init, tokens, labels, dtype, dev):
    # The expert bias only selects (no gradient), as in the runner.
    W = {k: v.to(dev).to(dtype).requires_grad_(not k.endswith("moe.expert_bias")) for k, v in init.items()}
    inv = torch.tensor(cfg["rope_inv_freq"], dtype=torch.float64)
    ang = torch.arange(cfg["seq"], dtype=torch.float64)[:, None] * inv[None, :]
    cos = (ang.cos() * cfg["rope_mscale"]).to(dev).to(dtype)
    sin = (ang.sin() * cfg["rope_mscale"]).to(dev).to(dtype)
    T = cfg["micro_batch_size"] * cfg["seq"]
    M = cfg["micro_batches"]
    total = torch.zeros((), dtype=torch.float64, device=dev)
    aux_total = torch.zeros((), dtype=torch.float64, device=dev)
    for mb in range(M):
        t = tokens[mb * T:(mb + 1) * T].to(dev)
        y = labels[mb * T:(mb + 1) * T].to(dev)
        ce, aux = forward_loss(cfg, W, t, y, cos, sin, routing_of(cfg, mb, dev))
        loss = ce / cfg["valid_tokens"]
        (loss + aux / M).backward()
        total += loss.detach().double()
        aux_total += aux.detach().double()
    grads = {k: (v.grad if v.grad is not None else torch.zeros_like(v)).float().cpu() for k, v in W.items()}
    return total.item(), aux_total.item(), grads


def compare(cfg, grads, loss, aux, ref_grads, loss_tol, label):
    ok = True
    rel = abs(loss - cfg["loss"]) / max(1e-12, abs(loss))
    print(f"{label}: loss runner {cfg['loss']:.6f} reference {loss:.6f} relative error {rel:.2e} (target {loss_tol:g})")
    ok &= rel <= loss_tol
    if "moe" in cfg and (cfg["moe"]["aux_loss_coeff"] > 0 or cfg["moe"]["z_loss_coeff"] > 0):
        ra = cfg["moe"]["aux_loss"]
        rel = abs(aux - ra) / max(1e-12, abs(aux))
        print(f"  aux + z loss runner {ra:.6e} reference {aux:.6e} relative error {rel:.2e} (target {loss_tol:g})")
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
    W = {k: v.to(dev).to(torch.bfloat16).requires_grad_(not k.endswith("moe.expert_bias")) for k, v in init.items()}
    trained = [v for v in W.values() if v.requires_grad]
    opt = torch.optim.AdamW(trained, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
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
                ce, aux = forward_loss(cfg, W, t, torch.roll(t, -1), cos, sin)
                (ce / (T * cfg["micro_batches"]) + aux / cfg["micro_batches"]).backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
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
    ap.add_argument("--bench-only", action="store_true", help="only the eager benchmark (no numerics check)")
    ap.add_argument("--bench-steps", type=int, default=10)
    args = ap.parse_args()
    cfg, init, grads = load(args.dump, with_grads=not args.bench_only)
    cfg["dump_dir"] = str(args.dump)
    if args.bench_only:
        bench(cfg, init, "cuda", args.bench_steps)
        return 0
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = torch.from_numpy(np.fromfile(args.dump / "tokens.i32", dtype=np.int32).astype(np.int64))
    labels = torch.from_numpy(np.fromfile(args.dump / "labels.i32", dtype=np.int32).astype(np.int64))
    ok = True
    torch.backends.cuda.matmul.allow_tf32 = False
    loss32, aux32, g32 = run_reference(cfg, init, tokens, labels, torch.float32, dev)
    ok &= compare(cfg, grads, loss32, aux32, g32, 1e-3, "fp32 reference")
    loss16, aux16, g16 = run_reference(cfg, init, tokens, labels, torch.bfloat16, dev)
    ok &= compare(cfg, grads, loss16, aux16, g16, 1e-2, "bf16 reference")
    if args.bench:
        bench(cfg, init, dev, args.bench_steps)
    print("OK" if ok else "MISSED a target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
