#!/usr/bin/env python3
"""The host block's microbatch_overhead_us from Megatron-LM host runs set 3
(MEGATRON_HOST_SET=3 scripts/device_run_megatron_host.sh; declared in
validation/measured/h200/megatron_host/DECLARATION_set3.md).

Per micro-batch count M (runs fixed_l{2,10}_m{M}, median iteration times t):
  s(M) = (t(10, M) - t(2, M)) / (8 M)        the layers' host time per layer and micro-batch
  I(M) = t(2, M) - 2 M s(M)                   the time outside the layers
and a least-squares line I(M) = a + b M over the micro-batch counts: `a` per iteration,
`b` per micro-batch. lcm already counts the kernels of the ops outside the layers (the embedding,
the final norm, the logits, the loss; forward and backward) at kernel_launch_us each, so
microbatch_overhead_us = b - those kernels x kernel_launch_us. The standard errors come from
the line's residuals.

Usage: python3 scripts/megatron_host_outside_fit.py SUMMARY.json [--lcm build/bin/lcm] [--launch-us K]
"""
import argparse
import json
import pathlib

from megatron_host_fit import HERE, SCEN, line, trace_ops


def outside_kernels(lcm):
    """Kernels of micro-batch 0's ops outside the layers (not `L.`, not the optimizer step)."""
    ops = trace_ops(lcm, SCEN / "scenario_dense.yaml", "num_layers=2", "global_batch_size=1")
    return sum(e.get("args", {}).get("host_kernels", 0) for e in ops
               if not e["name"].startswith("L.") and not e["name"].startswith("optimizer"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--lcm", default=str(HERE / "build/bin/lcm"))
    ap.add_argument("--launch-us", type=float, default=10.87, help="the profile's kernel_launch_us")
    a = ap.parse_args()
    runs = json.loads(pathlib.Path(a.summary).read_text())["runs"]
    t = {}
    for name, r in runs.items():
        if name.startswith("fixed_l"):
            layers, m = name[len("fixed_l"):].split("_m")
            t[(int(layers), int(m))] = r["median_5_12_ms"]
    ms = sorted({m for (_, m) in t if (2, m) in t and (10, m) in t})
    if len(ms) < 3:
        raise SystemExit("need fixed_l2_mM and fixed_l10_mM for at least three M")
    slope = {m: (t[(10, m)] - t[(2, m)]) / (8 * m) for m in ms}
    inter = {m: t[(2, m)] - 2 * m * slope[m] for m in ms}
    a0, se_a, b, se_b = line(ms, [inter[m] for m in ms])
    k = outside_kernels(a.lcm)
    launch = a.launch_us
    out = {
        "median_ms": {f"l{l}_m{m}": v for (l, m), v in sorted(t.items())},
        "layer_slope_ms": slope,
        "outside_layers_ms": inter,
        "per_iteration_ms": round(a0, 3), "per_iteration_se_ms": round(se_a, 3),
        "per_micro_batch_ms": round(b, 4), "per_micro_batch_se_ms": round(se_b, 3),
        "lcm_outside_kernels": k, "kernel_launch_us": launch,
        "host_block": {"microbatch_overhead_us": round(1000 * b - k * launch, 1)},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
