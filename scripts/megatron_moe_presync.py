#!/usr/bin/env python3
"""Host time of Megatron-Core's MoE layer forward, phase by phase, and where the token
dispatcher's device-to-host synchronisation falls in it (session 35, issue 12).

lcm times a standalone MoE-layer pass (the MoE layer benchmark's rows) as one host segment:
max(GPU, host) plus the dispatcher's synchronisation. But the Python that runs before that
synchronisation (the router, the dispatcher's preprocessing and first permutation) cannot hide
under GPU work queued earlier, because a benchmark's pass starts on an idle GPU: how much of
the layer's Python comes before the synchronisation decides how much of it the pass exposes.

Run it in place of pretrain_gpt.py (from .megatron/, as scripts/device_run_megatron_host.sh
runs Megatron-LM): it wraps MoELayer.forward and its phases (route, preprocess, dispatch,
routed_experts_compute, combine, postprocess) with host clocks, and torch.cuda.Event.synchronize
(the dispatcher's d2h_event) to find the synchronisation, then runs pretrain_gpt.py. The model
is small enough that the GPU never holds the host back, so each phase's host time is its
duration. Only forwards with autograd on (training) are recorded; the first quarter are dropped
as warm-up. Writes the per-phase medians (us) as JSON to $MOE_PRESYNC_OUT at exit.

    cd .megatron && MOE_PRESYNC_OUT=/tmp/p.json torchrun --nproc-per-node 1 \\
        ../scripts/megatron_moe_presync.py --num-layers 4 ... (pretrain_gpt.py's arguments)
"""
import atexit
import os
import runpy
import statistics
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
from megatron.core.transformer.moe import moe_layer as ml  # noqa: E402

from jsonio import write_json_atomic  # noqa: E402  (this script's folder, on sys.path)

PHASES = ["route", "preprocess", "dispatch", "routed_experts_compute", "combine", "postprocess"]
records = []
cur = None  # the forward being timed: {"t0": start, phase: seconds, ...}


def wrap_phase(name):
    orig = getattr(ml.MoELayer, name)

    def timed(self, *a, **k):
        t0 = time.perf_counter()
        r = orig(self, *a, **k)
        if cur is not None:
            cur[name] = cur.get(name, 0.0) + time.perf_counter() - t0
        return r

    setattr(ml.MoELayer, name, timed)


for _p in PHASES:
    wrap_phase(_p)

_orig_forward = ml.MoELayer.forward


def forward(self, *a, **k):
    global cur
    outer = cur
    cur = {"t0": time.perf_counter()}
    try:
        return _orig_forward(self, *a, **k)
    finally:
        cur["total"] = time.perf_counter() - cur.pop("t0")
        if torch.is_grad_enabled():
            records.append(cur)
        cur = outer


ml.MoELayer.forward = forward

_orig_sync = torch.cuda.Event.synchronize


def synchronize(self):
    t0 = time.perf_counter()
    _orig_sync(self)
    if cur is not None and "sync_at" not in cur:
        cur["sync_at"] = t0 - cur["t0"]  # host time from the layer's entry to the synchronisation
        cur["sync_wait"] = time.perf_counter() - t0


torch.cuda.Event.synchronize = synchronize


def write():
    out = os.environ.get("MOE_PRESYNC_OUT")
    if not out or not records:
        return
    keep = records[len(records) // 4:]
    keys = ["total", "sync_at", "sync_wait"] + PHASES
    res = {"records": len(records), "kept": len(keep), "argv": sys.argv[1:],
           "median_us": {k: 1e6 * statistics.median(r.get(k, 0.0) for r in keep) for k in keys},
           "p10_us": {k: 1e6 * sorted(r.get(k, 0.0) for r in keep)[len(keep) // 10] for k in keys},
           "p90_us": {k: 1e6 * sorted(r.get(k, 0.0) for r in keep)[(9 * len(keep)) // 10] for k in keys}}
    write_json_atomic(out, res)


atexit.register(write)
sys.argv[0] = "pretrain_gpt.py"
runpy.run_path("pretrain_gpt.py", run_name="__main__")
