#!/usr/bin/env python3
"""Score a kernel probe's attention points (scripts/probe_kernels.py --only attention) against lcm.

    score_flash2_probe.py PROBE.json --profile h100-sxm [--lcm build/bin/lcm] [--head-dim 128]

Every point of torch SDPA's flash backend (FlashAttention-2) is priced as lcm's flash2 kernel,
every point of its cuDNN backend as the fused kernel, forward and backward apart, with
`lcm calibrate --compare` (the model's own attention pricing). Prints a Markdown table per
backend and, for each, the share within 10 % and the mean |error| (error: + means lcm is
faster than measured). The backward is the probe's forward+backward minus its forward.
validation/measured/h100/flash2/DECLARATION.md says how this judges the flash2 terms.
"""
import argparse
import json
import subprocess
import sys
import tempfile


def points(probe, head_dim):
    out = []
    for p in probe["points"]:
        if p.get("kind") != "attention" or "error" in p or p.get("backend") not in ("flash", "cudnn"):
            continue
        if head_dim and p["head_dim"] != head_dim:
            continue
        s = p["seq"]
        name = "{}/d{}/hq{}/hkv{}/{}/s{}".format(p["backend"], p["head_dim"], p["heads_q"], p["heads_kv"],
                                                 "causal" if p["causal"] else "full", s)
        if p["batch"] != max(1, 32768 // s):  # probe_kernels.py's default batch goes unnamed
            name += "/b{}".format(p["batch"])
        for pas, ms in (("fwd", p["fwd_ms"]), ("bwd", p["bwd_ms"])):
            out.append({"family": "attention-probe", "key": f"{name}/{pas}", "op": f"attn.core.{pas}",
                        "correct": True, "time_us": {"median": ms * 1e3},
                        "model_op": {"kind": "attention", "b": p["batch"], "s_q": s, "s_kv": s, "hq": p["heads_q"],
                                     "hkv": p["heads_kv"], "d": p["head_dim"], "d_v": p["head_dim"],
                                     "work_fraction": 0.5 if p["causal"] else 1.0,  # causal as half the square, as lcm-exec's points
                                     "flash2": p["backend"] == "flash", "pass": pas}})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("probe")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--lcm", default="build/bin/lcm")
    ap.add_argument("--head-dim", type=int, default=0, help="only this head dim (0: all)")
    a = ap.parse_args()
    pts = points(json.load(open(a.probe)), a.head_dim)
    if not pts:
        sys.exit(f"{a.probe}: no attention points")
    measured = {p["key"]: p["time_us"]["median"] for p in pts}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"benchmark": "attention-probe", "points": pts}, f)
        f.flush()
        r = subprocess.run([a.lcm, "calibrate", "--compare", "--profile", a.profile, f.name, "--format", "json"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lcm calibrate --compare failed: {r.stderr.strip()}")
    pred = {row["key"]: row["predicted_s"] * 1e6 for row in json.loads(r.stdout)}
    for backend, label in (("flash", "FlashAttention-2 (lcm: flash2)"), ("cudnn", "cuDNN (lcm: fused)")):
        keys = [k for k in measured if k.startswith(backend + "/")]
        if not keys:
            continue
        print(f"\n### {label}\n\n| point | measured us | lcm us | err % (+: lcm faster) |\n|---|---:|---:|---:|")
        errs = []
        for k in keys:
            e = 100.0 * (measured[k] / pred[k] - 1.0)
            errs.append(e)
            print(f"| {k} | {measured[k]:.1f} | {pred[k]:.1f} | {e:+.1f} |")
        w = sum(abs(e) <= 10.0 for e in errs)
        print(f"\n{label}: {w} of {len(errs)} within 10 %, mean |error| {sum(abs(e) for e in errs) / len(errs):.1f} %, "
              f"mean signed {sum(errs) / len(errs):+.1f} %")


if __name__ == "__main__":
    main()
