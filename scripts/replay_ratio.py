#!/usr/bin/env python3
"""Per-op time ratio of replayed lcm-exec benchmarks against the runs they replay.

scripts/device_run_replay.sh re-runs committed summaries (e.g. the H200 ones) on another GPU.
This pairs every point of a replayed summary with the point of the same key in the original
(same relative path under each root) and prints, per op class, how many points paired and the
10th / 50th / 90th percentiles of replayed time / original time, as Markdown. A description of
two machines, not a model score: `lcm calibrate --compare` scores the model.

Usage: scripts/replay_ratio.py REPLAY_ROOT ORIGINAL_ROOT [FILE...]
  (FILE: relative paths to pair; default every *.json under REPLAY_ROOT but DECLARATION-like files)
"""
import json
import os
import statistics
import sys


def median_us(point):
    t = point.get("time_us")
    if isinstance(t, dict):
        return t.get("median")
    return t


def op_class(point):
    """A coarse class of a point: family plus the regime that decides its physics."""
    fam = point.get("family", "?")
    key = point.get("key", "")
    if fam == "gemm":
        dtype = point.get("dtype", "?")
        shape = key.split("/")[-1]
        try:
            m, n, k = (int(x) for x in shape.split("x")[:3])
        except ValueError:
            return "gemm " + dtype
        small = min(m, n)
        regime = "skinny (min(m,n) <= 256)" if small <= 256 else ("mid (min(m,n) <= 1024)" if small <= 1024 else "large")
        return "gemm %s %s" % (dtype, regime)
    if fam == "attention":
        return "attention " + key.split("/")[1]
    if fam == "membw":
        size = point.get("size", 0)
        return "copy < 8 MiB" if size < 8 << 20 else "copy >= 8 MiB"
    if fam == "moe":
        op = key.split("/")[-1]
        if ".experts.fc" in op:
            return "moe grouped GEMM"
        if ".router." in op:
            return "moe router GEMM"
        return "moe memory-bound"
    return fam


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    replay, original = argv[1], argv[2]
    files = argv[3:]
    if not files:
        for d, _, names in os.walk(replay):
            for n in names:
                if n.endswith(".json"):
                    files.append(os.path.relpath(os.path.join(d, n), replay))
    by_class = {}
    unpaired = 0
    devices = set()
    for rel in sorted(files):
        a_path, b_path = os.path.join(replay, rel), os.path.join(original, rel)
        if not os.path.isfile(b_path):
            print("%s: no original at %s" % (rel, b_path), file=sys.stderr)
            return 1
        a, b = json.load(open(a_path)), json.load(open(b_path))
        devices.add((a.get("system", {}).get("gpu_name", "?"), b.get("system", {}).get("gpu_name", "?")))
        ref = {p.get("key"): p for p in b.get("points", [])}
        for p in a.get("points", []):
            q = ref.get(p.get("key"))
            ta, tb = median_us(p), (median_us(q) if q else None)
            if not ta or not tb:
                unpaired += 1
                continue
            by_class.setdefault(op_class(p), []).append(ta / tb)
    print("| class | points | p10 | median | p90 |")
    print("|---|---:|---:|---:|---:|")
    allr = []
    for c in sorted(by_class):
        r = by_class[c]
        allr += r
        print("| %s | %d | %.3f | %.3f | %.3f |" % (c, len(r), percentile(r, 0.1), statistics.median(r), percentile(r, 0.9)))
    if allr:
        print("| all | %d | %.3f | %.3f | %.3f |" % (len(allr), percentile(allr, 0.1), statistics.median(allr), percentile(allr, 0.9)))
    print()
    print("replayed / original time; devices (replayed, original): %s; %d points without a pair"
          % (", ".join("%s vs %s" % d for d in sorted(devices)), unpaired))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
