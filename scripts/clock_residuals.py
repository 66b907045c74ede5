#!/usr/bin/env python3
"""Per op-class residuals of lcm compare against the run's SM clock.

usage: scripts/clock_residuals.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds an lcm-exec train summary.json (with `clocks`, session 10 on) and an
`lcm compare --format json` output named compare.json (or the file given by --compare NAME).
Prints one row per run, sorted by the run's median SM clock: the clock and board power, and
the error (predicted / measured - 1) of the dense GEMMs (GEMM ops outside the experts and the
router), the expert GEMMs, attention and the memory-bound class. Development analysis
(validation/measured/h200/session11/README.md): the GEMM benchmarks behind the calibrated
profile ran power-capped, so the residuals order by the run's clock.

--normalise GEMM_MHZ ATTN_MHZ: a what-if with the run's measured clock (an oracle the model
does not have): every GEMM's predicted time scaled by GEMM_MHZ / run clock and every
attention op's by ATTN_MHZ / run clock (the median SM clocks of the calibration benchmarks,
`clocks_after` of their points: 1470 and 1792.5 MHz for the committed H200 inputs), and the
class and step errors printed again; the step's other terms are unchanged.
"""
import argparse
import json
import os
import sys


def err(pred, meas):
    return pred / meas - 1 if meas > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--compare", default="compare.json", help="the compare JSON's file name in each run directory")
    ap.add_argument("--normalise", nargs=2, type=float, metavar=("GEMM_MHZ", "ATTN_MHZ"),
                    help="what-if: scale predicted GEMM and attention times by these clocks over the run's")
    a = ap.parse_args()
    rows = []
    for d in a.runs:
        try:
            s = json.load(open(os.path.join(d, "summary.json")))
            c = json.load(open(os.path.join(d, a.compare)))
        except (OSError, ValueError) as e:
            sys.exit(f"{d}: {e}")
        clk = s.get("clocks", {}).get("sm_mhz_median", -1)
        pw = s.get("clocks", {}).get("power_w_median", -1)
        sums = {"dense": [0.0, 0.0], "experts": [0.0, 0.0]}
        for o in c["ops"]:
            if o["class"] != "GEMM" or o["predicted_s"] is None or o["measured_s"] is None:
                continue
            k = "experts" if ".experts." in o["name"] else None if ".router." in o["name"] else "dense"
            if k:
                sums[k][0] += o["predicted_s"]
                sums[k][1] += o["measured_s"]
        cls = c["classes"]
        step_err = c["step"]["error"]
        attn = cls["attention"]["error"]
        if a.normalise and clk <= 0:
            print(f"{d}: no clock recorded (runs before session 10); left out of the what-if", file=sys.stderr)
            continue
        if a.normalise:
            fg, fa = a.normalise[0] / clk, a.normalise[1] / clk
            for k in sums:
                sums[k][0] *= fg
            delta = 0.0  # change of the predicted step
            attn_p = attn_m = 0.0
            for o in c["ops"]:
                if o["predicted_s"] is None:
                    continue
                if o["class"] == "GEMM":
                    delta += o["predicted_s"] * (fg - 1)
                elif o["class"] == "attention":
                    delta += o["predicted_s"] * (fa - 1)
                    attn_p += o["predicted_s"] * fa
                    attn_m += o["measured_s"] or 0.0
            attn = err(attn_p, attn_m)
            step_err = err(c["step"]["predicted_s"] + delta, c["step"]["measured_median_s"])
        rows.append((clk, pw, os.path.basename(os.path.normpath(d)), err(*sums["dense"]), err(*sums["experts"]),
                     attn, cls["memory-bound"]["error"], step_err))
    print("| SM clock (MHz) | power (W) | run | dense GEMMs | expert GEMMs | attention | memory-bound | step |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    pct = lambda v: "-" if v is None or v != v else "%+.1f %%" % (100 * v)
    for r in sorted(rows):
        print("| %.0f | %.0f | %s | %s | %s | %s | %s | %s |" % (r[0], r[1], r[2], *map(pct, r[3:])))
    steps = sorted(abs(r[7]) for r in rows if r[7] == r[7])
    if steps:
        mid = steps[len(steps) // 2] if len(steps) % 2 else (steps[len(steps) // 2 - 1] + steps[len(steps) // 2]) / 2
        print("\n%d runs: step |error| median %.1f %%, worst %.1f %%%s" %
              (len(steps), 100 * mid, 100 * steps[-1], " (clock-normalised what-if)" if a.normalise else ""))


if __name__ == "__main__":
    main()
