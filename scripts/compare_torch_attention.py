#!/usr/bin/env python3
"""lcm-exec's cuDNN fused attention against torch.nn.functional.scaled_dot_product_attention.

Reads an `lcm-exec bench attention` summary.json, times PyTorch's SDPA on the same shapes with
each backend asked for (cuDNN, FlashAttention-2 by default) and the same method, and writes the
side-by-side table (docs/executor.md, "Attention"):

  same problem  causal GQA attention, bf16, q/k/v/dO stored BSHD ([b, s, h, d] contiguous, viewed
                as [b, h, s, d]: what a QKV projection produces), scale 1/sqrt(d), enable_gqa=True
                (K/V keep h_kv heads), inputs uniform in [-1, 1) rounded to bf16
  same timing   warm-up of >= --warmup repetitions and >= --warmup-ms ms (the power-limited GPU
                settles), then repetitions until --point-ms (at least 5, at most --iters), each
                repetition one forward (training mode: the graph keeps what backward needs) and one
                backward (torch.autograd.grad with dO), a pair of CUDA events around each; buffer
                rotation over >= max(100 MB, 2 x L2) of distinct inputs; medians
  same FLOPs    fwd 4 b s^2 h_q d / 2 (causal), bwd 2.5 x fwd

usage:
  compare_torch_attention.py probe                      # versions, backends, one small cuDNN call
  compare_torch_attention.py run --lcm attn/summary.json --out torch_attention.json \\
                                 [--backends cudnn,flash]
  compare_torch_attention.py table --lcm A.json [A2.json] --torch torch_attention.json \\
                                   --out comparison_attention.md [--target 0.95]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}


def rotation_sets(set_bytes, l2_bytes, max_sets=16):
    rot = max(100e6, 2.0 * l2_bytes)
    return int(min(max_sets, max(1, math.ceil(rot / set_bytes))))


def fwd_flops(b, s, hq, d):
    return 4.0 * b * s * s * hq * d / 2  # causal


def versions():
    import torch
    return {
        "torch": torch.__version__,
        "torch CUDA": torch.version.cuda,
        "torch cuDNN": torch.backends.cudnn.version(),
        "GPU": torch.cuda.get_device_name(0),
    }


def make_inputs(b, s, hq, hkv, d, seed, dev):
    import torch
    g = torch.Generator(device=dev)
    g.manual_seed(seed)

    def t(h):  # BSHD storage, [b, h, s, d] view
        x = torch.rand(b, s, h, d, device=dev, generator=g, dtype=torch.float32).mul_(2).sub_(1)
        return x.to(torch.bfloat16).transpose(1, 2)

    q, k, v, do = t(hq), t(hkv), t(hkv), t(hq)
    for x in (q, k, v):
        x.requires_grad_(True)
    return q, k, v, do


def bench_shape(pt, backend, a):
    """Times one (shape, backend). Returns a result dict (with 'error' if the backend refused)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, s, hq, hkv, d = (int(x) for x in pt["shape"].split("x"))
    dev = torch.device("cuda", 0)
    scale = 1.0 / math.sqrt(d)
    res = {"shape": pt["shape"], "label": pt.get("label", ""), "backend": backend}
    q_el, kv_el = b * s * hq * d, b * s * hkv * d
    set_bytes = 2.0 * (4 * q_el + 4 * kv_el) + 4.0 * b * hq * s
    sets = rotation_sets(set_bytes, torch.cuda.get_device_properties(0).L2_cache_size)
    free, _ = torch.cuda.mem_get_info()
    while sets > 1 and sets * set_bytes + 2 * set_bytes > 0.8 * free:
        sets -= 1
    bufs = [make_inputs(b, s, hq, hkv, d, 1000 + i, dev) for i in range(sets)]
    gqa = hq != hkv
    mode = "native enable_gqa"

    def fwd(i):
        q, k, v, _ = bufs[i % sets]
        if mode == "native enable_gqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
        kk = k.repeat_interleave(hq // hkv, dim=1)
        vv = v.repeat_interleave(hq // hkv, dim=1)
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=True, scale=scale)

    def bwd(out, i):
        q, k, v, do = bufs[i % sets]
        return torch.autograd.grad(out, (q, k, v), do)

    be = getattr(SDPBackend, BACKENDS[backend])
    with sdpa_kernel([be]):
        try:
            out = fwd(0)
            bwd(out, 0)
            torch.cuda.synchronize()
        except (RuntimeError, TypeError) as e:
            if not gqa:
                res["error"] = str(e).splitlines()[0][:300]
                return res
            mode = "expanded K/V (repeat_interleave in the timed region)"
            try:
                out = fwd(0)
                bwd(out, 0)
                torch.cuda.synchronize()
            except (RuntimeError, TypeError) as e2:
                res["error"] = str(e2).splitlines()[0][:300]
                return res
        res["gqa"] = mode if gqa else "mha"
        # Sanity check of the forward on 4 rows of head 0 against float64.
        q0, k0, v0, _ = bufs[0]
        rows = torch.tensor([0, 1, s // 2, s - 1], device=dev)
        with torch.no_grad():
            qr = q0[0, 0, rows].double()
            kk, vv = k0[0, 0].double(), v0[0, 0].double()
            sc = (qr @ kk.T) * scale
            mask = torch.arange(s, device=dev)[None, :] > rows[:, None]
            sc = sc.masked_fill(mask, float("-inf"))
            ref = torch.softmax(sc, dim=-1) @ vv
            got = out.detach()[0, 0, rows].double()
            res["rel_l2_error_4_rows"] = ((got - ref).norm() / ref.norm()).item()
        del out

        done, t0, rep_s = 0, time.perf_counter(), 0.0
        while done < a.warmup or time.perf_counter() - t0 < a.warmup_ms / 1000.0:
            tb = time.perf_counter()
            batch = max(a.warmup, 1)
            for _ in range(batch):
                o = fwd(done)
                bwd(o, done)
                done += 1
            del o
            torch.cuda.synchronize()
            rep_s = (time.perf_counter() - tb) / batch
        reps = a.iters
        if a.point_ms > 0 and rep_s > 0:
            reps = min(a.iters, max(5, int(a.point_ms / 1000.0 / rep_s)))
        reps = max(reps, sets)
        ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(reps)]
        torch.cuda.synchronize()
        for i in range(reps):
            e = ev[i]
            e[0].record()
            o = fwd(i)
            e[1].record()
            e[2].record()
            gr = bwd(o, i)
            e[3].record()
            del o, gr
        torch.cuda.synchronize()
    tf = [1000.0 * e[0].elapsed_time(e[1]) for e in ev]
    tb = [1000.0 * e[2].elapsed_time(e[3]) for e in ev]
    tt = [x + y for x, y in zip(tf, tb)]
    ff = fwd_flops(b, s, hq, d)
    med = statistics.median
    res.update({
        "warmup": done, "reps": reps, "buffers": sets,
        "fwd_us": {"median": med(tf), "min": min(tf), "max": max(tf)},
        "bwd_us": {"median": med(tb), "min": min(tb), "max": max(tb)},
        "total_us": {"median": med(tt), "min": min(tt), "max": max(tt)},
        "fwd_tflops": ff / (med(tf) * 1e-6) / 1e12,
        "bwd_tflops": 2.5 * ff / (med(tb) * 1e-6) / 1e12,
        "total_tflops": 3.5 * ff / (med(tt) * 1e-6) / 1e12,
    })
    del bufs
    torch.cuda.empty_cache()
    return res


def lcm_shapes(path):
    with open(path) as f:
        j = json.load(f)
    pts = {}
    for p in j["points"]:
        if p.get("family") != "attention":
            continue
        e = pts.setdefault(p["shape"], {"shape": p["shape"], "label": p.get("label", "")})
        e[p["extra"]["pass"]] = p
    return j, list(pts.values())


def cmd_probe(_a):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    print(json.dumps(versions()), flush=True)
    dev = torch.device("cuda", 0)
    q, k, v, do = make_inputs(1, 1024, 8, 2, 128, 7, dev)
    for name, be in BACKENDS.items():
        with sdpa_kernel([getattr(SDPBackend, be)]):
            try:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                torch.autograd.grad(o, (q, k, v), do)
                torch.cuda.synchronize()
                print(f"  {name}: causal GQA fwd+bwd ok", flush=True)
            except Exception as e:  # report and go on
                print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)


def cmd_run(a):
    j, shapes = lcm_shapes(a.lcm)
    out = {"versions": versions(), "method": {"warmup": a.warmup, "warmup_ms": a.warmup_ms, "iters": a.iters,
                                              "point_ms": a.point_ms}, "results": []}
    backends = [x for x in a.backends.split(",") if x]
    for pt in shapes:
        for be in backends:
            r = bench_shape(pt, be, a)
            out["results"].append(r)
            if "error" in r:
                print(f"  torch {be:6s} {pt['shape']:>20s}  unsupported: {r['error']}", flush=True)
            else:
                print(f"  torch {be:6s} {pt['shape']:>20s} fwd {r['fwd_us']['median'] / 1000:9.3f} ms "
                      f"{r['fwd_tflops']:6.1f} TF  bwd {r['bwd_us']['median'] / 1000:9.3f} ms {r['bwd_tflops']:6.1f} TF  "
                      f"total {r['total_tflops']:6.1f} TF  ({r['reps']} reps, {r['gqa']}, rel err "
                      f"{r['rel_l2_error_4_rows']:.1e})", flush=True)
            with open(a.out, "w") as f:
                json.dump(out, f, indent=1)


def cmd_table(a):
    runs = []
    for path in a.lcm:
        if os.path.exists(path):
            runs.append(lcm_shapes(path))
    with open(a.torch) as f:
        tj = json.load(f)
    torch_res = {}
    for r in tj["results"]:
        torch_res.setdefault(r["shape"], {})[r["backend"]] = r
    j0 = runs[0][0]
    sysj = j0["system"]
    first = next((p for p in j0["points"] if p.get("family") == "attention"), {})
    cud = first.get("extra", {}).get("cudnn", {})
    lines = ["# lcm-exec attention vs torch.nn.functional.scaled_dot_product_attention", ""]
    lines.append(f"- GPU: {sysj.get('gpu_name', '?')}, driver {sysj.get('driver_version', '?')}; "
                 f"lcm-exec {j0.get('version', '?')} with cuDNN {cud.get('cudnn_runtime', '?')} "
                 f"(headers {cud.get('cudnn_headers', '?')})")
    for i, (jj, _) in enumerate(runs):
        lines.append(f"- lcm-exec run {i + 1}: `" + jj["command_line"].split("/bin/")[-1] + "`")
    lines.append("- torch: " + ", ".join(f"{k} {v}" for k, v in tj["versions"].items()))
    m = tj.get("method", {})
    lines.append(f"- method (both sides): warm-up >= {m.get('warmup')} reps and >= {m.get('warmup_ms')} ms, "
                 f"timed reps until {m.get('point_ms')} ms (5..{m.get('iters')}), CUDA events per forward and per "
                 "backward, buffer rotation >= max(100 MB, 2 x L2), medians; causal, GQA, bf16, BSHD, scale 1/sqrt(d)")
    lines.append("- TFLOP/s: fwd 4 b s^2 h_q d / 2, bwd 2.5 x fwd, fwd+bwd 3.5 x fwd, over the median times")
    lines.append(f"- ratio: lcm-exec / the fastest torch backend on that shape; target >= {a.target} on fwd+bwd")
    lines.append("")
    hdr = ("| shape (b x s x h_q x h_kv x d) | fwd lcm | fwd torch cuDNN | fwd torch flash | fwd ratio | "
           "fwd+bwd lcm | fwd+bwd torch cuDNN | fwd+bwd torch flash | fwd+bwd ratio | bwd lcm | bwd torch best |")
    lines += [hdr, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    worst, worst_fwd = None, None

    def mean(xs):
        return sum(xs) / len(xs)

    for pt in runs[0][1]:
        shape = pt["shape"]
        ls = [p for _, pts in runs for p in pts if p["shape"] == shape and "fwd+bwd" in p]
        if not ls:
            continue
        lf = mean([p["fwd"]["tflops"] for p in ls])
        lt = mean([p["fwd+bwd"]["tflops"] for p in ls])
        lb = mean([p["bwd"]["tflops"] for p in ls])
        ok = all(p["fwd+bwd"].get("correct") for p in ls)
        tr = torch_res.get(shape, {})

        def tv(be, key):
            r = tr.get(be)
            return r.get(key) if r and "error" not in r else None

        def fmt(x):
            return f"{x:.1f}" if x is not None else "n/a"

        tfs = [x for x in (tv("cudnn", "fwd_tflops"), tv("flash", "fwd_tflops")) if x]
        tts = [x for x in (tv("cudnn", "total_tflops"), tv("flash", "total_tflops")) if x]
        tbs = [x for x in (tv("cudnn", "bwd_tflops"), tv("flash", "bwd_tflops")) if x]
        rf = lf / max(tfs) if tfs else None
        rt = lt / max(tts) if tts else None
        if rt is not None:
            worst = rt if worst is None else min(worst, rt)
        if rf is not None:
            worst_fwd = rf if worst_fwd is None else min(worst_fwd, rf)
        runs_txt = " (" + ", ".join(f"{p['fwd+bwd']['tflops']:.0f}" for p in ls) + ")" if len(ls) > 1 else ""
        lines.append(
            f"| {shape}{'' if ok else ' (WRONG)'} | {lf:.1f} | {fmt(tv('cudnn', 'fwd_tflops'))} | "
            f"{fmt(tv('flash', 'fwd_tflops'))} | {'n/a' if rf is None else format(rf, '.3f')} | {lt:.1f}{runs_txt} | "
            f"{fmt(tv('cudnn', 'total_tflops'))} | {fmt(tv('flash', 'total_tflops'))} | "
            f"{'n/a' if rt is None else format(rt, '.3f')}{'' if rt is None or rt >= a.target else ' (below)'} | "
            f"{lb:.1f} | {fmt(max(tbs) if tbs else None)} |")
    notes = []
    for shape, per in torch_res.items():
        for be, r in per.items():
            if "error" in r:
                notes.append(f"- torch {be} on {shape}: not run ({r['error']})")
            elif r.get("gqa", "").startswith("expanded"):
                notes.append(f"- torch {be} on {shape}: {r['gqa']}")
    lines.append("")
    lines.append(f"Worst fwd+bwd ratio: {'n/a' if worst is None else format(worst, '.3f')}; worst fwd ratio: "
                 f"{'n/a' if worst_fwd is None else format(worst_fwd, '.3f')}.")
    if notes:
        lines += [""] + notes
    text = "\n".join(lines) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("probe")
    r = sub.add_parser("run")
    r.add_argument("--lcm", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--backends", default="cudnn,flash")
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--warmup-ms", type=float, default=500)
    r.add_argument("--iters", type=int, default=20)
    r.add_argument("--point-ms", type=float, default=2000)
    t = sub.add_parser("table")
    t.add_argument("--lcm", nargs="+", required=True)
    t.add_argument("--torch", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--target", type=float, default=0.95)
    a = ap.parse_args()
    {"probe": cmd_probe, "run": cmd_run, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
