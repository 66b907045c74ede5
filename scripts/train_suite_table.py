#!/usr/bin/env python3
"""The training-runner suite's table: prediction against measurement, per run and per set.

  train_suite_table.py RUNS_DIR DECLARATION.md

RUNS_DIR holds one folder per run (scripts/device_run_train_suite.sh `suite`: summary.json and
`lcm compare --format json` as compare.json). DECLARATION.md names the runs of each set in
its tables ("## Development set", "## Held out"): the figures are reported per set, never
pooled. Prints Markdown: one row per run (step time and peak allocated, predicted and
measured, error = predicted / measured - 1, tokens/s, MFU), then the median and worst
|error| of each set against the issue's targets (step 5 % / 10 %, memory 3 % / 6 %).
"""
import json
import re
import statistics
import sys
from pathlib import Path


def sets(declaration: Path):
    out, current = {}, None
    for line in declaration.read_text().splitlines():
        if line.startswith("## "):
            current = "held out" if "Held out" in line else "development set" if "Development" in line else None
        m = re.match(r"\| ([a-z0-9_.]+) \|", line)
        if current and m and m.group(1) != "name":
            out[m.group(1)] = current
    return out


def row(run: Path):
    c = json.loads((run / "compare.json").read_text())
    s = json.loads((run / "summary.json").read_text())
    mem = {m["item"]: m for m in c["memory"]}
    peak = mem["peak allocated"]
    return {
        "step_p": c["step"]["predicted_s"], "step_m": c["step"]["measured_median_s"], "step_e": c["step"]["error"],
        "mem_p": peak["predicted_bytes"], "mem_m": peak["measured_bytes"], "mem_e": peak["error"],
        "act_e": mem["activations"]["error"], "tps": s["tokens_per_s"], "mfu": s["mfu"],
        "seq": s["config"].get("seq_length"), "mb": s["config"].get("micro_batches"), "rc": s["config"].get("recompute"),
    }


def main():
    runs, decl = Path(sys.argv[1]), Path(sys.argv[2])
    which = sets(decl)
    rows = {}
    for name in which:
        if (runs / name / "compare.json").exists():
            rows[name] = row(runs / name)
    print("| run | set | seq | micro-batches | recompute | step predicted (ms) | measured (ms, median) | error "
          "| peak alloc predicted (MiB) | measured (MiB) | error | tokens/s | MFU % |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {which[name]} | {r['seq']} | {r['mb']} | {r['rc']} | {1e3 * r['step_p']:.1f} | "
              f"{1e3 * r['step_m']:.1f} | {100 * r['step_e']:+.1f}% | {r['mem_p'] / 2**20:.0f} | {r['mem_m'] / 2**20:.0f} | "
              f"{100 * r['mem_e']:+.1f}% | {r['tps']:.0f} | {100 * r['mfu']:.1f} |")
    missing = [n for n in which if n not in rows]
    if missing:
        print(f"\nnot measured: {', '.join(missing)}")
    print()
    for label in ("development set", "held out"):
        sel = [r for n, r in rows.items() if which[n] == label]
        if not sel:
            continue
        st = [abs(r["step_e"]) for r in sel]
        me = [abs(r["mem_e"]) for r in sel]
        print(f"- **{label}** ({len(sel)} runs): step time median |error| {100 * statistics.median(st):.1f}%, "
              f"worst {100 * max(st):.1f}% (target 5% / 10%); peak allocated median |error| "
              f"{100 * statistics.median(me):.1f}%, worst {100 * max(me):.1f}% (target 3% / 6%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
