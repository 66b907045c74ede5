#!/usr/bin/env python3
"""Score unfused-attention measurements (scripts/probe_unfused_attention.py) against lcm.

    score_unfused_attention.py MEASURED.json --profile h100-sxm [--lcm build/bin/lcm]

prices every point with `lcm calibrate --compare` (the model's unfused kernels) and, beside
it, the same points priced as one fused kernel (the model op with "unfused": false: what lcm
priced for training.attention_backend unfused before session 34), and prints a Markdown
table, the share within 10 % and the mean |error| of each.

    score_unfused_attention.py --declare --profile h100-sxm

prints the predictions for the probe's declared cases (its CASES list, read without importing
torch) before anything is measured.
"""
import argparse
import ast
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def declared_cases():
    src = open(os.path.join(HERE, "probe_unfused_attention.py")).read()
    for n in ast.parse(src).body:
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CASES":
            return ast.literal_eval(n.value)
    raise SystemExit("probe_unfused_attention.py: no CASES list")


def placeholder_doc():
    pts = []
    for (b, s, hq, hkv, dqk, dv, p) in declared_cases():
        for pas in ("fwd", "bwd"):
            pts.append({"family": "unfused-attention", "key": f"unfused/b{b}/s{s}/hq{hq}/hkv{hkv}/d{dqk}x{dv}/p{p}/{pas}",
                        "op": f"attn.core.{pas}", "correct": True, "time_us": {"median": 1.0},
                        "model_op": {"kind": "attention", "b": b, "s_q": s, "s_kv": s, "hq": hq, "hkv": hkv, "d": dqk,
                                     "d_v": dv, "work_fraction": 0.5, "unfused": True, "dropout": p > 0,
                                     "pass": pas}})
    return {"benchmark": "unfused-attention", "points": pts}


def predict(doc, profile, lcm):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "points.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = subprocess.run([lcm, "calibrate", "--compare", "--profile", profile, path, "--format", "json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"lcm calibrate --compare failed: {r.stderr.strip()}")
        return {row["key"]: row["predicted_s"] * 1e6 for row in json.loads(r.stdout)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("measured", nargs="?")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--lcm", default=os.path.join(HERE, "..", "build", "bin", "lcm"))
    ap.add_argument("--declare", action="store_true")
    ap.add_argument("--gpu-kernels", action="store_true",
                    help="measured = the pass's GPU kernels summed (a probe run with --kernels), not its wall time")
    a = ap.parse_args()
    if a.declare:
        pred = predict(placeholder_doc(), a.profile, a.lcm)
        print(f"| point | predicted us ({a.profile}) |\n|---|---:|")
        for k, v in pred.items():
            print(f"| {k} | {v:.1f} |")
        return
    if not a.measured:
        ap.error("MEASURED.json is required without --declare")
    doc = json.load(open(a.measured))
    unf = predict(doc, a.profile, a.lcm)
    fused_doc = copy.deepcopy(doc)
    for p in fused_doc["points"]:
        p["model_op"]["unfused"] = False
    fused = predict(fused_doc, a.profile, a.lcm)
    what = "the GPU kernels summed (torch.profiler)" if a.gpu_kernels else "wall time (CUDA events)"
    print(f"GPU: {doc.get('gpu', '?')}, torch {doc.get('torch', '?')}; profile {a.profile}; measured: {what}\n")
    print("| point | softmax | measured us | lcm unfused us | error | as one fused kernel us | error |")
    print("|---|---|---:|---:|---:|---:|---:|")
    errs, ferrs = [], []
    for p in doc["points"]:
        k = p["key"]
        m = p["extra"]["kernel_sum_us"] if a.gpu_kernels else p["time_us"]["median"]
        e, fe = unf[k] / m - 1.0, fused[k] / m - 1.0
        errs.append(e)
        ferrs.append(fe)
        print(f"| {k} | {p['extra']['softmax']} | {m:.1f} | {unf[k]:.1f} | {100 * e:+.1f} % | {fused[k]:.1f} | "
              f"{100 * fe:+.1f} % |")
    n = len(errs)

    def summary(es):
        within = sum(1 for e in es if abs(e) <= 0.10)
        return within, 100.0 * sum(abs(e) for e in es) / n, 100.0 * sum(es) / n

    w, mae, signed = summary(errs)
    fw, fmae, fsigned = summary(ferrs)
    print(f"\nlcm unfused: {w} of {n} within 10 % ({100.0 * w / n:.1f} %), mean |error| {mae:.1f} %, "
          f"signed {signed:+.1f} % (+: lcm slower)")
    print(f"as one fused kernel: {fw} of {n} within 10 % ({100.0 * fw / n:.1f} %), mean |error| {fmae:.1f} %, "
          f"signed {fsigned:+.1f} %")


if __name__ == "__main__":
    sys.exit(main())
