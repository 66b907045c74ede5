#!/usr/bin/env bash
# One call on a 1 x H200 device machine (nvidia-h200): build lcm-exec and its tests, run the
# host and single-GPU tests, `lcm-exec bench attention` over the sweep (causal GQA, d128 at
# 4K..128K tokens, d64 and d192 at 4K/16K/64K), PyTorch's scaled_dot_product_attention with
# its cuDNN and FlashAttention backends on the same shapes and with the same method, and the
# side-by-side table. Leaves at most 8 files in $OUT:
#   device_log_attention.txt, attention.json/.csv (lcm-exec summary), torch_attention.json,
#   comparison_attention.md, torch_frontend_log.txt (the cuDNN frontend's log of torch's SDPA
#   graphs, head), attention_results.tar.gz (everything, traces included), and
#   attention_torch_cudnn.json when lcm-exec also ran on torch's cuDNN library.
# Every step is time-boxed and the script goes on after a failed step.
# Usage (device machine, repository root):  OUT=/tmp/out bash scripts/device_run_attention.sh [all|quick]
#   quick: tests and the d128 sweep only, no second lcm-exec pass.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
RES=$ROOT/build/device-results-attention
rm -rf "$RES"
mkdir -p "$RES"
exec > >(tee -a "$OUT/device_log_attention.txt") 2>&1
MODE=${1:-all}

export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONUNBUFFERED=1
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
MPI="mpirun --allow-run-as-root --bind-to none -np 1"
EXE=$ROOT/build/bin/lcm-exec
SHAPES=sweep
[ "$MODE" = quick ] && SHAPES=1x4Kx32x8x128,1x8Kx32x8x128,1x16Kx32x8x128,1x32Kx32x8x128,1x64Kx32x8x128,1x128Kx32x8x128

section environment
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1; mpirun --version | head -1
for h in /usr/local/cuda/include/cudnn_version.h /usr/include/cudnn_version.h /usr/include/x86_64-linux-gnu/cudnn_version.h; do
  [ -f "$h" ] && echo "$h: cuDNN $(grep -h -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' "$h" | awk '{printf "%s ", $3}')"
done
TORCH_CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
echo "torch's cuDNN package: ${TORCH_CUDNN_DIR:-none}"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'gpus', torch.cuda.device_count())"

section configure
CMAKE_ARGS=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF
            -DCMAKE_CUDA_ARCHITECTURES=90)
# No system cuDNN: build against the one PyTorch ships (headers and libcudnn.so.9).
if ! ls /usr/local/cuda/include/cudnn_graph.h /usr/include/cudnn_graph.h /usr/include/x86_64-linux-gnu/cudnn_graph.h \
     >/dev/null 2>&1 && [ -n "$TORCH_CUDNN_DIR" ]; then
  CMAKE_ARGS+=(-DCUDNN_ROOT="$TORCH_CUDNN_DIR")
  export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
fi
cmake "${CMAKE_ARGS[@]}" > "$RES/configure.log" 2>&1 || tail -30 "$RES/configure.log"
grep -E "lcm-exec" "$RES/configure.log"

section build
time timeout 300 ninja -C build -j 16 lcm-exec lcm_executor_host_tests lcm_executor_gpu_tests 2>&1 | grep -E "error|warning|FAILED|Linking" | head -40
ls -la build/bin/ | grep -E "lcm-exec|lcm_executor"

section "host tests"
timeout 60 build/bin/lcm_executor_host_tests 2>&1 | tail -3
section "single-GPU tests (GEMM, copy, reference attention vs float64, cuDNN attention vs reference, CLI)"
timeout 200 build/bin/lcm_executor_gpu_tests --gtest_filter='-MpirunTwoGpus.*' 2>&1 | grep -vE '^\[ RUN' | tail -60
GPU_TESTS_RC=${PIPESTATUS[0]}
if [ "$GPU_TESTS_RC" != 0 ]; then
  section "cuDNN error log of one small point (the GPU tests failed)"
  CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr timeout 60 $MPI "$EXE" bench attention --shapes 1x1024x8x2x128 \
    -w 1 --warmup-ms 0 -n 2 2>&1 | grep -vE '^\s*$' | tail -80
fi

section "torch SDPA probe (cuDNN frontend log of torch's graphs in torch_frontend_log.txt)"
CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE="$RES/torch_frontend_log.txt" timeout 90 \
  python3 scripts/compare_torch_attention.py probe
head -c 3000000 "$RES/torch_frontend_log.txt" > "$OUT/torch_frontend_log.txt" 2>/dev/null

section "lcm-exec bench attention ($SHAPES)"
timeout 240 $MPI "$EXE" bench attention --shapes "$SHAPES" --out "$RES/attn"
cp "$RES/attn/summary.json" "$OUT/attention.json" 2>/dev/null
cp "$RES/attn/summary.csv" "$OUT/attention.csv" 2>/dev/null

section "torch scaled_dot_product_attention, cuDNN and flash backends, same shapes"
timeout 300 python3 scripts/compare_torch_attention.py run --lcm "$RES/attn/summary.json" \
  --out "$RES/torch_attention.json" --backends cudnn,flash
cp "$RES/torch_attention.json" "$OUT/" 2>/dev/null

# lcm-exec on torch's own cuDNN library too, when it is another version than the one lcm-exec
# was linked against (the backend API is stable within cuDNN 9): same engine version both sides.
LCM_CUDNN=$(python3 -c "import json; j=json.load(open('$RES/attn/summary.json')); print(j['points'][0]['extra']['cudnn']['cudnn_runtime'])" 2>/dev/null)
TORCH_CUDNN=$(python3 -c "import torch; v=torch.backends.cudnn.version(); print(f'{v//10000}.{v//100%100}.{v%100}')" 2>/dev/null)
echo "cuDNN: lcm-exec ran on ${LCM_CUDNN:-?}, torch on ${TORCH_CUDNN:-?}"
TABLE_LCM=("$RES/attn/summary.json")
if [ "$MODE" = all ] && [ -n "$TORCH_CUDNN_DIR" ] && [ -n "$LCM_CUDNN" ] && [ "$LCM_CUDNN" != "$TORCH_CUDNN" ] &&
   [ "$(elapsed)" -lt "${LCM_SECOND_PASS_BEFORE_S:-330}" ]; then
  section "lcm-exec again, on torch's cuDNN $TORCH_CUDNN ($TORCH_CUDNN_DIR/lib), d128 sweep"
  timeout 150 $MPI -x LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}" "$EXE" bench attention \
    --shapes 1x4Kx32x8x128,1x8Kx32x8x128,1x16Kx32x8x128,1x32Kx32x8x128,1x64Kx32x8x128,1x128Kx32x8x128 \
    --out "$RES/attn_torch_cudnn"
  cp "$RES/attn_torch_cudnn/summary.json" "$OUT/attention_torch_cudnn.json" 2>/dev/null
fi

section "comparison table"
python3 scripts/compare_torch_attention.py table --lcm "${TABLE_LCM[@]}" --torch "$RES/torch_attention.json" \
  --out "$RES/comparison_attention.md"
if [ -f "$RES/attn_torch_cudnn/summary.json" ]; then
  python3 scripts/compare_torch_attention.py table --lcm "$RES/attn_torch_cudnn/summary.json" \
    --torch "$RES/torch_attention.json" --out "$RES/comparison_attention_torch_cudnn.md"
  { echo; echo "## lcm-exec on torch's cuDNN library"; echo; sed 1d "$RES/comparison_attention_torch_cudnn.md"; } \
    >> "$RES/comparison_attention.md"
fi
cp "$RES/comparison_attention.md" "$OUT/" 2>/dev/null

section collect
tar -C "$RES" -czf "$OUT/attention_results.tar.gz" . 2>/dev/null
ls -la "$OUT"
section done
sleep 1  # let tee flush the log
