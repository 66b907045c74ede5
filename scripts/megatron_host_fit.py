#!/usr/bin/env python3
"""The host block's per-layer Python from the Megatron-LM host-time runs
(scripts/device_run_megatron_host.sh): layer_overhead_{fwd,bwd}_us and
moe_layer_overhead_{fwd,bwd}_us, the host time per layer and pass that lcm's kernel count does not
already explain (docs/time-model.md, "Host-bound regime").

Inputs: the runs' summary.json (per layer and micro-batch: dense forward + backward, dense
forward, 8-expert MoE forward + backward and forward, 16-expert forward + backward and forward)
and lcm's own schedule of the same two layers (`lcm trace` of the runs' scenarios), whose ops
per pass times kernel_launch_us is the host time lcm already counts.

  dense:  layer_overhead_fwd = H_dense_fwd - K_dense_fwd * launch
          layer_overhead_bwd = H_dense_bwd - K_dense_bwd * launch
  MoE:    the local implementation runs one module call per expert (SequentialMLP), so the
          per-expert slope (16 - 8 experts) is removed: H0 = H8 - 8 * (H16 - H8) / 8, the layer
          without experts (its forward share as a dense layer's: fwd / (fwd + bwd)); lcm counts
          the experts' grouped GEMMs as one kernel per expert.
          moe_overhead_fwd = H0_fwd - K0_fwd * launch - sync - layer_overhead_fwd
          moe_overhead_bwd = H0_bwd - K0_bwd * launch - layer_overhead_bwd
          (K0: the MoE layer's kernels without the grouped GEMMs; the forward's one
          device-to-host sync is timed in the run and counted by lcm as idle, so it is removed.)

Several summaries (sets of runs): each quantity is the mean over the sets that have it.

Usage: python3 scripts/megatron_host_fit.py SUMMARY.json [SUMMARY.json ...] [--lcm build/bin/lcm]
"""
import argparse
import json
import math
import pathlib
import subprocess
import tempfile


HERE = pathlib.Path(__file__).resolve().parent.parent
SCEN = HERE / "validation/measured/h200/megatron_host"


def line(xs, ys):
    """Least squares y = a + b x: (a, se_a, b, se_b), standard errors from the residuals (the
    set-3 and set-7 fits, megatron_host_outside_fit.py and megatron_host_iteration_fit.py)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    sigma = math.sqrt(sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / (n - 2))
    return a, sigma * math.sqrt(1 / n + mx * mx / sxx), b, sigma / math.sqrt(sxx)


def trace_ops(lcm, scenario, *overrides):
    """The op events ("X") of `lcm trace` of a scenario (with --set overrides)."""
    sets = [a for o in overrides for a in ("--set", o)]
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "t.json"
        subprocess.run([lcm, "trace", str(scenario), *sets, "-o", str(out)], check=True, capture_output=True)
        doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X"]


def kernels_per_pass(lcm, scenario):
    """lcm's kernels of layer 0, micro-batch 0, per pass (the trace's `host_kernels`, the model's
    own count), and those of its grouped expert GEMMs."""
    events = trace_ops(lcm, scenario)
    k = {"fwd": 0, "bwd": 0, "fwd_grouped": 0, "bwd_grouped": 0}
    for e in events:
        if not e["name"].startswith("L."):
            continue
        a = e.get("args", {})
        if a.get("layer") != 0 or a.get("micro_batch") != 0:
            continue
        name = e["name"]
        p = "fwd" if name.endswith(".fwd") else ("rec" if ".recompute" in name else "bwd")
        if p == "rec":
            continue
        k[p] += a["host_kernels"]
        if a.get("groups", 1) > 1:
            k[p + "_grouped"] += a["host_kernels"]
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary", nargs="+")
    ap.add_argument("--lcm", default=str(HERE / "build/bin/lcm"))
    ap.add_argument("--launch-us", type=float, default=10.87, help="the profile's kernel_launch_us")
    ap.add_argument("--sync-us", type=float, default=16.66, help="the profile's sync_us")
    a = ap.parse_args()
    sets = [json.loads(pathlib.Path(f).read_text()) for f in a.summary]
    keys = {k for x in sets for k, v in x.items() if isinstance(v, (int, float))}
    s = {k: sum(x[k] for x in sets if k in x) / sum(1 for x in sets if k in x) for k in keys}
    spread = {k: [round(x[k], 1) for x in sets if k in x] for k in sorted(keys)}
    L, S = a.launch_us, a.sync_us
    kd = kernels_per_pass(a.lcm, SCEN / "scenario_dense.yaml")
    km = kernels_per_pass(a.lcm, SCEN / "scenario_moe.yaml")
    hd, hd_f = s["dense_layer_fwd_bwd_us"], s["dense_fwd_pass_us"]
    # Top-8 and top-2 MoE layers (where a set has both): their mean. Nothing in the layer's
    # Python depends on top-k; set 1 measured them 5.3 ms apart and set 2 1.4 ms apart in the
    # other order (run-to-run drift), so the mean is used and the two are reported.
    h8_k8 = s["moe_layer_e8_fwd_bwd_us"]
    h8 = (h8_k8 + s["moe_layer_e8k2_fwd_bwd_us"]) / 2 if "moe_layer_e8k2_fwd_bwd_us" in s else h8_k8
    h8_f = s["moe_e8_fwd_pass_us"]
    pe = s["per_local_expert_fwd_bwd_us"]
    # An expert's module calls split between the passes as a dense layer's do: the 16-expert
    # full-recompute run's forward minus the 8-expert one's is inside the runs' drift (set 1:
    # 351 us per expert forward, more than the 301 us of its forward and backward together).
    pe_f = pe * hd_f / hd
    h0, h0_f = h8 - 8 * pe, h8_f - 8 * pe_f
    lo_f = hd_f - kd["fwd"] * L
    lo_b = (hd - hd_f) - kd["bwd"] * L
    k0_f, k0_b = km["fwd"] - km["fwd_grouped"], km["bwd"] - km["bwd_grouped"]
    mo_f = h0_f - k0_f * L - S - lo_f
    mo_b = (h0 - h0_f) - k0_b * L - lo_b
    out = {
        "measured_us": {"dense_fwd_bwd": hd, "dense_fwd": hd_f, "moe_e8_fwd_bwd": h8, "moe_e8_top8_fwd_bwd": h8_k8, "moe_e8_fwd": h8_f,
                        "per_expert_fwd_bwd": pe, "per_expert_fwd": pe_f, "moe_no_experts_fwd_bwd": h0,
                        "moe_no_experts_fwd": h0_f},
        "per_set_us": spread,
        "lcm_kernels": {"dense": kd, "moe_e8": km},
        "kernel_launch_us": L, "sync_us": S,
        "host_block": {"layer_overhead_fwd_us": round(lo_f, 1), "layer_overhead_bwd_us": round(lo_b, 1),
                       "moe_layer_overhead_fwd_us": round(mo_f, 1), "moe_layer_overhead_bwd_us": round(mo_b, 1)},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
