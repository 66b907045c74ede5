#!/usr/bin/env bash
# One call on a one-GPU Hopper device machine: build lcm-exec and its GPU tests, check the
# block-scaled FP8 GEMM against the CPU, then measure per-tensor and block-scaled FP8 GEMMs side
# by side on the two shape sets that validation/measured/h200/fp8_block/DECLARATION.md declares.
# Leaves in $OUT: fp8_block_log.txt, fit.json (set A) and heldout.json (set B).
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_fp8_block.sh
set -uo pipefail
. "$(dirname "$0")/device_single_gpu.sh"
device_setup fp8_block_log.txt fp8-block-results
device_build

gemms() {  # gemms NAME SHAPES
  section "GEMM fp8,fp8_block: $1"
  timeout 150 $MPI "$EXE" bench gemm --dtype fp8,fp8_block --out "$RES/$1" --shapes "$2"
  cp "$RES/$1/summary.json" "$OUT/$1.json"
}
gemms fit models
gemms fit_heldout_shapes 128x4096x4096,256x4096x4096,256x8192x8192,1024x1024x1024,2048x2048x2048,8192x1536x7168
gemms heldout 1024x5120x4096,2816x7168x3072,9728x6144x2048,5120x5120x2560,8192x2048x7168,8192x7168x2048,\
8192x14336x4096,6144x4096x14336,512x4096x14336,128x7168x2048
# Last, as time allows: the GEMM GPU tests (the block-scaled one among them); FP8_GPU_TESTS=0
# leaves them for a later call (every benchmark point above is already checked against the CPU).
if [ "${FP8_GPU_TESTS:-1}" != 0 ]; then
  section "GPU tests: GEMMs"
  ninja -C build -j 16 lcm_executor_gpu_tests 2>&1 | tail -2
  build/bin/lcm_executor_gpu_tests --gtest_filter='GemmOnGpu.*' 2>&1 | tail -15
fi
section done
