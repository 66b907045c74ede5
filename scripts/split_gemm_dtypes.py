#!/usr/bin/env python3
"""Split an lcm-exec GEMM summary by dtype: writes SUMMARY minus its points of other dtypes.

`lcm calibrate` fits every class its inputs have points for; a run measured with
`--dtype fp8,fp8_block` (per-tensor and block-scaled side by side) would refit both FP8 terms.
Keeping one dtype's points fits only its term (validation/measured/h200/fp8_block/DECLARATION.md
fits efficiency.gemm_fp8_block on the block-scaled points alone).

Usage: scripts/split_gemm_dtypes.py SUMMARY.json DTYPE OUT.json   (DTYPE: bf16, fp8_e4m3, fp8_block)
"""
import json
import os
import sys

from jsonio import write_json_atomic


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, dtype, out = sys.argv[1:]
    with open(src) as f:
        d = json.load(f)
    kept = [p for p in d.get("points", []) if p.get("dtype") == dtype]
    if not kept:
        sys.exit(f"{src}: no points of dtype {dtype}")
    d["points"] = kept
    d["split_from"] = {"file": os.path.basename(src), "dtype": dtype}
    write_json_atomic(out, d)
    print(f"{out}: {len(kept)} {dtype} points")


if __name__ == "__main__":
    main()
