#!/usr/bin/env python3
"""Score unfused-attention measurements (scripts/probe_unfused_attention.py) against lcm.

    score_unfused_attention.py MEASURED.json --profile h100-sxm [--lcm build/bin/lcm]

prices every point with `lcm calibrate --compare` (the model's unfused kernels) and, beside
it, the same points priced as one fused kernel (the model op with "unfused": false: what lcm
priced for training.attention_backend unfused before session 34), and prints a Markdown
table, the share within 10 % and the mean |error| of each.

    score_unfused_attention.py --declare --profile h100-sxm

    score_unfused_attention.py MEASURED.json --kernel-classes

prints, for a probe run with --kernels, each pass's GPU time by kernel class (GEMMs, softmax,
dtype casts and copies, other elementwise kernels), with the count of kernels in each.

prints the predictions for the declared cases (scripts/unfused_attention_cases.py) before
anything is measured.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

from unfused_attention_cases import CASES, point

HERE = os.path.dirname(os.path.abspath(__file__))


def declared_points():
    """The declared cases as summary points for `lcm calibrate --compare`, which reads a measured
    median for every point: 1 us stands in for it, and only the predictions are printed."""
    return {"benchmark": "unfused-attention",
            "points": [point(c, pas, {"median": 1.0}) for c in CASES for pas in ("fwd", "bwd")]}


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


# Kernel classes by name (torch 2.11 on Hopper: cuBLAS's nvjet / sm90 GEMMs, Inductor's Triton
# kernels, ATen's softmax and elementwise kernels, the profiler's Memcpy / Memset rows).
KERNEL_CLASSES = (
    ("gemm", ("nvjet", "gemm", "sm90_xmma", "cutlass")),
    ("softmax", ("softmax", "SoftMax", "triton_")),
    ("cast/copy", ("direct_copy", "bfloat16_copy", "Memcpy", "copy_kernel")),
    ("memset", ("Memset",)),
    ("elementwise", ("elementwise", "Functor")),
)


def kernel_class(name):
    for cls, keys in KERNEL_CLASSES:
        if any(k in name for k in keys):
            return cls
    return "other"


def kernel_classes(doc):
    classes = [c for c, _ in KERNEL_CLASSES] + ["other"]
    print("| point | " + " | ".join(f"{c} us (kernels)" for c in classes) + " | sum us |")
    print("|---|" + "---:|" * (len(classes) + 1))
    for p in doc["points"]:
        ks = p.get("extra", {}).get("kernels")
        if not ks:
            raise SystemExit(f"{p['key']}: no kernels recorded (run the probe with --kernels)")
        t = {c: [0.0, 0] for c in classes}
        for name, us in ks:
            c = kernel_class(name)
            t[c][0] += us
            t[c][1] += 1
        cells = " | ".join(f"{t[c][0]:.1f} ({t[c][1]})" for c in classes)
        print(f"| {p['key']} | {cells} | {sum(v[0] for v in t.values()):.1f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("measured", nargs="?")
    ap.add_argument("--profile")
    ap.add_argument("--lcm", default=os.path.join(HERE, "..", "build", "bin", "lcm"))
    ap.add_argument("--declare", action="store_true")
    ap.add_argument("--gpu-kernels", action="store_true",
                    help="measured = the pass's GPU kernels summed (a probe run with --kernels), not its wall time")
    ap.add_argument("--kernel-classes", action="store_true",
                    help="print each pass's GPU time by kernel class (a probe run with --kernels; no lcm)")
    a = ap.parse_args()
    if a.kernel_classes:
        if not a.measured:
            ap.error("MEASURED.json is required with --kernel-classes")
        kernel_classes(json.load(open(a.measured)))
        return
    if not a.profile:
        ap.error("--profile is required")
    if a.declare:
        pred = predict(declared_points(), a.profile, a.lcm)
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
