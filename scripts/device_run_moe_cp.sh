#!/usr/bin/env bash
# One call on the 2 x H200 device machine (nvidia-h200-x2): build lcm-exec and its tests, run
# the host tests and the MoE / ring-attention GPU tests, then the measurements of
# `bench moe` (EP = 2) and `bench cp-attention` (CP = 2), leaving in $OUT:
#   device_log_moe_cp.txt, moe_*.{json,csv}, cp_attention_*.{json,csv}, loads_*.txt,
#   trace_*_rank0.json.
# Every step is time-boxed and the script goes on after a failed step. Usage (repository
# root of the device machine):
#   OUT=/tmp/out bash scripts/device_run_moe_cp.sh [all|tests|measure]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
RES=$ROOT/build/device-results-moe-cp
rm -rf "$RES"
mkdir -p "$RES"
exec > >(tee -a "$OUT/device_log_moe_cp.txt") 2>&1
MODE=${1:-all}

export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
MPI="mpirun --allow-run-as-root --bind-to none"
EXE=$ROOT/build/bin/lcm-exec
keep() {  # keep NAME DIR: summary json/csv, rank-0 trace and loads files of a results directory
  [ -f "$RES/$2/summary.json" ] && cp "$RES/$2/summary.json" "$OUT/$1.json"
  [ -f "$RES/$2/summary.csv" ] && cp "$RES/$2/summary.csv" "$OUT/$1.csv"
  [ -f "$RES/$2/trace_rank0.json" ] && cp "$RES/$2/trace_rank0.json" "$OUT/trace_$1_rank0.json"
  for f in "$RES/$2"/loads_*.txt; do [ -f "$f" ] && cp "$f" "$OUT/$1_$(basename "$f")"; done
  true
}

section environment
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
nvcc --version | tail -1; g++ --version | head -1; mpirun --version | head -1

section configure
TORCH_CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
CMAKE_ARGS=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF
            -DCMAKE_CUDA_ARCHITECTURES=90)
if [ -f "$TORCH_CUDNN_DIR/include/cudnn_graph.h" ]; then
  CMAKE_ARGS+=(-DCUDNN_ROOT="$TORCH_CUDNN_DIR")
  export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
  echo "cuDNN: PyTorch's ($TORCH_CUDNN_DIR)"
fi
if ! cmake "${CMAKE_ARGS[@]}" > "$RES/configure.log" 2>&1; then
  tail -5 "$RES/configure.log"
  # Without the Debian-packaged C++ libraries: unpack Debian 12's from the carried .devdeps
  # (see scripts/device_run.sh).
  echo "configure failed on the image's packages; retrying with the carried .devdeps"
  mkdir -p /tmp/devdeps
  for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
  rm -rf build/CMakeCache.txt build/CMakeFiles
  cmake "${CMAKE_ARGS[@]}" -DCMAKE_PREFIX_PATH=/tmp/devdeps/usr > "$RES/configure.log" 2>&1 || tail -30 "$RES/configure.log"
fi
grep -E "lcm-exec" "$RES/configure.log"

section build
time timeout 400 ninja -C build -j 32 lcm-exec lcm_executor_host_tests lcm_executor_gpu_tests 2>&1 | grep -E "error|FAILED" | head -40
ls -la build/bin/ | grep -E "lcm-exec|lcm_executor"

if [ "$MODE" != measure ]; then
section "host tests"
timeout 60 build/bin/lcm_executor_host_tests 2>&1 | tail -3
section "GPU tests: bench moe and cp-attention (1 and 2 GPUs, planted errors)"
timeout 300 build/bin/lcm_executor_gpu_tests --gtest_filter='BenchCommandLine.*' > "$RES/gpu_tests.log" 2>&1
grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|tests? ran' "$RES/gpu_tests.log"
grep -B2 -A40 'Failure' "$RES/gpu_tests.log" | head -150
fi

NGPU=$(nvidia-smi -L | wc -l)
if [ "$MODE" != tests ] && [ "$NGPU" -ge 2 ]; then
section "moe, Mixtral-8x7B-like layer, EP = 2 (2 ranks): dropless and CF 1.0/1.25, balanced and zipf:1.2"
timeout 200 $MPI -np 2 "$EXE" bench moe --layout ep=2 --tokens 8192 --hidden 4096 --ffn 14336 --experts 8 --topk 2 \
  --capacity-factor none,1.0,1.25 --skew balanced,zipf:1.2 --point-ms 1500 --out "$RES/moe_mixtral_ep2"
keep moe_mixtral_ep2 moe_mixtral_ep2

section "moe, DeepSeek-V3-like layer (256 experts, top-8, 8 groups / 4, sigmoid), EP = 2"
timeout 200 $MPI -np 2 "$EXE" bench moe --layout ep=2 --tokens 4096 --hidden 7168 --ffn 2048 --experts 256 --topk 8 \
  --groups 8 --topk-groups 4 --score sigmoid --capacity-factor none,1.0 --skew balanced --point-ms 1500 \
  --out "$RES/moe_dsv3_ep2"
keep moe_dsv3_ep2 moe_dsv3_ep2

section "cp-attention, CP = 2 ring, 8K / 32K / 128K tokens, 32 query / 8 KV heads, d 128"
timeout 240 $MPI -np 2 "$EXE" bench cp-attention --layout cp=2 --point-ms 1500 --out "$RES/cp_attention_cp2"
keep cp_attention_cp2 cp_attention_cp2
elif [ "$MODE" != tests ]; then
section "one GPU only: moe without EP (Mixtral-like, dropless and CF 1.0; balanced and zipf:1.2)"
timeout 150 $MPI -np 1 "$EXE" bench moe --tokens 8192 --hidden 4096 --ffn 14336 --experts 8 --topk 2 \
  --capacity-factor none,1.0 --skew balanced,zipf:1.2 --point-ms 1500 --out "$RES/moe_mixtral_ep1"
keep moe_mixtral_ep1 moe_mixtral_ep1
section "one GPU only: moe without EP (DeepSeek-V3-like: 256 experts, top-8, groups 8/4, sigmoid)"
timeout 150 $MPI -np 1 "$EXE" bench moe --tokens 4096 --hidden 7168 --ffn 2048 --experts 256 --topk 8 --groups 8 \
  --topk-groups 4 --score sigmoid --capacity-factor none,1.0 --skew balanced --point-ms 1500 --out "$RES/moe_dsv3_ep1"
keep moe_dsv3_ep1 moe_dsv3_ep1
section "one GPU only: cp-attention with cp = 1 (the ring's diagonal step alone, checked as on 2 GPUs)"
timeout 120 $MPI -np 1 "$EXE" bench cp-attention --shapes 1x8Kx32x8x128,1x32Kx32x8x128 --point-ms 1000 --out "$RES/cp_attention_cp1"
keep cp_attention_cp1 cp_attention_cp1
fi

section collect
tar -C "$RES" -czf "$OUT/results_moe_cp.tar.gz" . 2>/dev/null
rm -f "$OUT"/trace_*.json "$OUT"/*loads_*.txt "$OUT"/*.csv  # all of them are in the tarball
section done
ls -la "$OUT"
sleep 1
