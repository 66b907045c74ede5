#!/usr/bin/env bash
# One call on a one-GPU Hopper device machine: the held-out long-sequence attention set of
# validation/measured/h100/attention_l2/DECLARATION.md, and the bf16 GEMMs whose CPU check
# failed on the H100 in session 29 (split-K with bf16 partials), re-run with the split-K-aware
# checker. Leaves in $OUT: attention_l2_log.txt, attention.json, gemm_splitk.json.
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_attention_l2.sh
set -uo pipefail
. "$(dirname "$0")/device_single_gpu.sh"
device_setup attention_l2_log.txt attention-l2-results
device_build

section "GEMM bf16: the split-K shape and its neighbours"
timeout 120 $MPI "$EXE" bench gemm --dtype bf16 --out "$RES/gemm" \
  --shapes 6144x100x4096,80x8192x4096,8192x40x4096,16384x24x7168,4096x96x8192
cp "$RES/gemm/summary.json" "$OUT/gemm_splitk.json"

section "attention: the declared held-out set"
timeout 420 $MPI "$EXE" bench attention --point-ms 500 --out "$RES/attn" --shapes \
1x40Kx16x8x128,1x72Kx16x16x128,1x104Kx8x8x128,1x120Kx16x4x128,1x168Kx8x8x128,1x288Kx8x8x128,\
2x112Kx8x2x128,1x160Kx16x8x64,1x256Kx8x8x64,1x320Kx8x4x64,1x48Kx16x8x192,1x80Kx16x8x192,1x64Kx8x8x256
cp "$RES/attn/summary.json" "$OUT/attention.json"
section done
