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
        rows.append((clk, pw, os.path.basename(os.path.normpath(d)), err(*sums["dense"]), err(*sums["experts"]),
                     cls["attention"]["error"], cls["memory-bound"]["error"], c["step"]["error"]))
    print("| SM clock (MHz) | power (W) | run | dense GEMMs | expert GEMMs | attention | memory-bound | step |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    pct = lambda v: "-" if v is None or v != v else "%+.1f %%" % (100 * v)
    for r in sorted(rows):
        print("| %.0f | %.0f | %s | %s | %s | %s | %s | %s |" % (r[0], r[1], r[2], *map(pct, r[3:])))


if __name__ == "__main__":
    main()
