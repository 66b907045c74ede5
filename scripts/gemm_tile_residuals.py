#!/usr/bin/env python3
"""cuBLASLt's chosen tile for each committed H200 `bench gemm` BF16 shape, next to the model's error.

  lcm calibrate --compare @validation/measured/h200/calibration_inputs.txt \
      --profile hwprofiles/h200-sxm.calibrated.yaml --format csv -o /tmp/cmp.csv
  scripts/gemm_tile_residuals.py /tmp/cmp.csv [CUBLASLT_H]

lcm-exec records the heuristic's algorithm (extra.algo: tile_id, waves, splitk, cluster) with
every GEMM it times. This script names the tile from cublasLt.h's cublasLtMatmulTile_t (default
/usr/local/cuda/include/cublasLt.h), joins each shape's mean error (predicted / measured - 1,
from the compare CSV) and prints the shapes with min(M, N) in [150, 1100], then the mean and
median error of the compute-bound shapes (k >= 2048, min(M, N) >= 128) by the tile's
arithmetic intensity tm x tn / (tm + tn). A diagnosis of the mid-m GEMM bias (session 23), not a
fit.
"""
import csv
import glob
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tile_names(header: str):
    text = Path(header).read_text()
    body = re.search(r"typedef enum \{(.*?)\} cublasLtMatmulTile_t;", text, re.S).group(1)
    return {int(v): k.replace("CUBLASLT_MATMUL_TILE_", "") for k, v in re.findall(r"(CUBLASLT_MATMUL_TILE_\w+)\s*=\s*(\d+)", body)}


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tiles = tile_names(sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda/include/cublasLt.h")
    algo = {}
    for f in glob.glob(str(ROOT / "validation/measured/h200/**/*.json"), recursive=True):
        try:
            d = json.load(open(f))
        except (ValueError, OSError):
            continue
        if not (isinstance(d, dict) and isinstance(d.get("points"), list)):
            continue
        for p in d["points"]:
            if not isinstance(p, dict) or p.get("family") != "gemm" or not str(p.get("dtype", "bf16")).startswith("bf16"):
                continue
            a = (p.get("extra") or {}).get("algo")
            if a and "tile_id" in a:
                algo[p["shape"]] = (tiles.get(a["tile_id"], str(a["tile_id"])), a.get("waves"), a.get("splitk"))
    errors = {}
    for r in csv.DictReader(open(sys.argv[1])):
        if r["op"].startswith("bench.gemm.") and r["class"] == "gemm_bf16":
            errors.setdefault(r["shape"].split()[0], []).append(float(r["error"].rstrip("%")))
    rows = []
    for shape, e in errors.items():
        if shape in algo:
            m, n, k = map(int, shape.split("x"))
            rows.append((min(m, n), k, shape, statistics.mean(e), *algo[shape]))
    rows.sort()
    print("| shape | error % | tile | waves | split-K |\n|---|---:|---|---:|---:|")
    for mn, k, shape, e, tile, waves, splitk in rows:
        if 150 <= mn <= 1100:
            print(f"| {shape} | {e:+.1f} | {tile} | {waves:.2f} | {splitk} |")
    buckets = [(0, 50), (50, 60), (60, 70), (70, 90), (90, 1e9)]
    print("\n| tile intensity | shapes | mean error % | median error % |\n|---|---:|---:|---:|")
    for lo, hi in buckets:
        e = []
        for mn, k, shape, err, tile, waves, splitk in rows:
            if k < 2048 or mn < 128 or "x" not in tile:
                continue
            a, b = map(int, tile.split("x")[:2])
            if lo <= a * b / (a + b) < hi:
                e.append(err)
        if e:
            print(f"| {lo}-{hi if hi < 1e9 else ''} | {len(e)} | {statistics.mean(e):+.1f} | {statistics.median(e):+.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
