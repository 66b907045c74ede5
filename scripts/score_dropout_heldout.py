#!/usr/bin/env python3
"""Score the attention dropout rates on a probe_dropout.py output (session 33, issue 12).

usage: scripts/score_dropout_heldout.py PROBE.json [PROFILE.yaml]
(the rates are the profile's attention_dropout_{fwd,bwd}_Gelem_per_s; default hwprofiles/h100-sxm.yaml,
the frozen profile of the declaration). For each cuDNN shape and direction: (1) the added
time, measured (p 0.1 - p 0) against elements / rate; (2) the whole kernel at dropout 0.1, the
measured dropout-free time plus the priced addition, against the measured time at 0.1
(validation/measured/h100/dropout/DECLARATION_heldout.md). Prints a Markdown table and the
counts within 10 %.
"""
import json
import os
import re
import sys


def profile_rate(path, key):
    """The profile's value of efficiency.KEY (G elements per second) as elements per second."""
    m = re.search(r"^\s*" + key + r":\s*([0-9.eE+-]+)", open(path).read(), re.M)
    if not m:
        sys.exit(f"{path}: no {key} (the profile prices attention dropout free)")
    return float(m.group(1)) * 1e9


def main():
    d = json.load(open(sys.argv[1]))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    prof = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "hwprofiles", "h100-sxm.yaml")
    rf = profile_rate(prof, "attention_dropout_fwd_Gelem_per_s")
    rb = profile_rate(prof, "attention_dropout_bwd_Gelem_per_s")
    print("| shape (b, h, s, d) | direction | measured p 0 / 0.1 (us) | added: measured / priced (us) | added error | whole kernel error |")
    print("|---|---|---|---|---:|---:|")
    n = within = 0
    for r in d["attention"]:
        if r["backend"] != "cudnn":
            continue
        shape = f"{r['batch']}, {r['heads']}, {r['seq']}, {r['head_dim']}" + ("" if r.get("causal", True) else ", full")
        if "error" in r:
            print(f"| {shape} | refused | {r['error']} | | | |")
            continue
        el = r["batch"] * r["heads"] * r["seq"] ** 2 * (0.5 if r.get("causal", True) else 1.0)
        f0, f1 = r["fwd_us_p0"], r["fwd_us_p01"]
        b0, b1 = r["fwdbwd_us_p0"] - f0, r["fwdbwd_us_p01"] - f1
        for name, t0, t1, rate in (("forward", f0, f1, rf), ("backward", b0, b1, rb)):
            added = el / rate * 1e6
            whole = (t0 + added) / t1 - 1
            n += 1
            within += abs(whole) <= 0.10
            print(f"| {shape} | {name} | {t0:.0f} / {t1:.0f} | {t1 - t0:.0f} / {added:.0f} | "
                  f"{(added / (t1 - t0) - 1) * 100 if t1 > t0 else float('nan'):+.1f} % | {whole * 100:+.1f} % |")
    print(f"\nwhole kernel within 10 %: {within} of {n}")


if __name__ == "__main__":
    main()
