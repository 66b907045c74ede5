#!/usr/bin/env python3
"""Megatron-LM host runs, set 7: the host time per iteration from Megatron's own timers.

Reads the logs of the timer runs (`--timing-log-level 1`: `forward-backward`, `optimizer` and
its sub-timers once per iteration) and fits, over the runs' parameter-tensor counts n (from the
gradient buckets' listing), the declared lines (validation/measured/h200/megatron_host/
DECLARATION_set7.md):
  optimizer timer        t_opt  = a_opt  + p n
  rest of the iteration  t_rest = a_rest + q n   (iteration - forward-backward - optimizer)
and the optimizer's parts (distributed optimizer's copies, inner step, the remainder: gradient
norm and clipping). Per run: medians over iterations 5 on of the per-iteration values, with the
median's standard error (1.2533 s / sqrt(k)); the lines by least squares over the runs, standard
errors from the residuals. Prints the hardware profile values: optimizer_tensor_us = p + q,
iteration_overhead_us = a_rest - sync_us.

Usage: python3 scripts/megatron_host_iteration_fit.py set7/a/logs.tar.gz [--sync-us 16.66]
"""
import argparse
import math
import re
import statistics
import sys
import tarfile

from megatron_host_fit import line

TIMER = re.compile(r"^\s+([a-z][a-z0-9-]+) \.+: \(([0-9.]+), [0-9.]+\)", re.M)
ITER = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
TENSOR = re.compile(r"^\tmodule\.", re.M)
FIRST = 4  # iterations 5 on


def median_se(values):
    return statistics.median(values), 1.2533 * statistics.stdev(values) / math.sqrt(len(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", help="logs.tar.gz of a MEGATRON_HOST_SET=7 MEGATRON_HOST_PART=a run")
    ap.add_argument("--sync-us", type=float, default=16.66, help="the profile's sync_us, charged already")
    args = ap.parse_args()
    runs = {}
    with tarfile.open(args.logs) as tar:
        for m in tar.getmembers():
            if not m.isfile() or not m.name.endswith(".log"):
                continue
            text = tar.extractfile(m).read().decode(errors="replace")
            timers = {}
            for name, v in TIMER.findall(text):
                timers.setdefault(name, []).append(float(v))
            its = [float(x) for x in ITER.findall(text)]
            if "optimizer" not in timers or len(timers["optimizer"]) != len(its) or len(its) <= FIRST + 2:
                continue  # not a timer run
            k = slice(FIRST, None)
            it, fb, opt = its[k], timers["forward-backward"][k], timers["optimizer"][k]
            copies = [a + b for a, b in zip(timers["optimizer-copy-to-main-grad"][k],
                                            timers["optimizer-copy-main-to-model-params"][k])]
            inner = timers["optimizer-inner-step"][k]
            runs[m.name.rsplit("/", 1)[-1][:-4]] = {
                "tensors": len(TENSOR.findall(text)),
                "iteration": median_se(it), "forward-backward": median_se(fb), "optimizer": median_se(opt),
                "copies": median_se(copies), "inner step": median_se(inner),
                "norm, clip, rest": median_se([o - c - i for o, c, i in zip(opt, copies, inner)]),
                "rest of iteration": median_se([a - b - c for a, b, c in zip(it, fb, opt)]),
            }
    if len(runs) < 3:
        sys.exit(f"{args.logs}: {len(runs)} timer runs found, need 3 or more")
    names = sorted(runs, key=lambda r: runs[r]["tensors"])
    parts = ["iteration", "forward-backward", "optimizer", "copies", "inner step", "norm, clip, rest",
             "rest of iteration"]
    print("run | tensors | " + " | ".join(f"{p} ms" for p in parts))
    for r in names:
        v = runs[r]
        print(f"{r} | {v['tensors']} | " + " | ".join(f"{v[p][0]:.2f} ± {v[p][1]:.2f}" for p in parts))
    xs = [runs[r]["tensors"] for r in names]
    fits = {}
    for p in parts[2:]:
        a, sa, b, sb = line(xs, [runs[r][p][0] for r in names])
        fits[p] = (a, sa, b, sb)
        print(f"{p}: {a:.3f} ± {sa:.3f} ms + {1e3 * b:.1f} ± {1e3 * sb:.1f} us per tensor")
    p, q = fits["optimizer"][2], fits["rest of iteration"][2]
    print(f"optimizer_tensor_us: {1e3 * (p + q):.1f}  (optimizer {1e3 * p:.1f} + rest {1e3 * q:.1f})")
    print(f"optimizer_tensor_us without the unfused norm and Adam step: "
          f"{1e3 * (fits['copies'][2] + q):.1f}  (copies {1e3 * fits['copies'][2]:.1f} + rest {1e3 * q:.1f})")
    print(f"iteration_overhead_us: {1e3 * fits['rest of iteration'][0] - args.sync_us:.1f}  "
          f"(rest intercept {1e3 * fits['rest of iteration'][0]:.1f} - sync {args.sync_us})")


if __name__ == "__main__":
    main()
