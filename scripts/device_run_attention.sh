#!/usr/bin/env bash
# One call on a 1 x H200 device machine (nvidia-h200): build lcm-exec and its tests, run the
# host and single-GPU tests, then, in the order lcm-exec, torch, lcm-exec (A-B-A: neither side
# gets the cooler GPU), `lcm-exec bench attention` over the sweep (causal GQA, d128 at 4K..128K
# tokens, d64 and d192 at 4K/16K/64K) and PyTorch's scaled_dot_product_attention with its cuDNN
# and FlashAttention-2 backends on the same shapes with the same method, and the table.
#
# cuDNN: lcm-exec is built against and runs on the cuDNN library PyTorch ships (its wheel's
# nvidia/cudnn: headers and libcudnn.so.9), so both sides run the same cuDNN engines; where the
# system has another cuDNN 9 (the image's /usr/lib/x86_64-linux-gnu), the same binary runs the
# d128 sweep once more on it (the backend API is stable within cuDNN 9). LCM_CUDNN=system
# builds against the system cuDNN instead.
#
# Leaves at most 8 files in $OUT: device_log_attention.txt, attention.json/.csv and
# attention_run2.json (lcm-exec runs 1 and 2), torch_attention.json, comparison_attention.md,
# attention_system_cudnn.json (when run), attention_results.tar.gz (everything: traces, the
# cuDNN frontend's log of torch's SDPA graphs). Every step is time-boxed and the script goes
# on after a failed step.
# Usage (device machine, repository root):  OUT=/tmp/out bash scripts/device_run_attention.sh [all|quick]
#   quick: tests and the d128 sweep, one lcm-exec run, no system-cuDNN pass.
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
if [ "${LCM_CUDNN:-torch}" = torch ] && [ -f "$TORCH_CUDNN_DIR/include/cudnn_graph.h" ]; then
  CMAKE_ARGS+=(-DCUDNN_ROOT="$TORCH_CUDNN_DIR")
  export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
  echo "cuDNN: PyTorch's ($TORCH_CUDNN_DIR)"
fi
rm -f build/CMakeCache.txt
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
grep -c "EXECUTION_PLAN_DESCRIPTOR :" "$RES/torch_frontend_log.txt" 2>/dev/null
grep -o "EXECUTION_PLAN_DESCRIPTOR : [_a-z0-9=]*" "$RES/torch_frontend_log.txt" 2>/dev/null | head -4

lcm_run() {  # lcm_run NAME [extra mpirun args]: the sweep into $RES/NAME
  local name=$1; shift
  section "lcm-exec bench attention ($SHAPES) -> $name"
  timeout 240 $MPI "$@" "$EXE" bench attention --shapes "$SHAPES" --out "$RES/$name"
}
lcm_run attn
cp "$RES/attn/summary.json" "$OUT/attention.json" 2>/dev/null
cp "$RES/attn/summary.csv" "$OUT/attention.csv" 2>/dev/null

section "torch scaled_dot_product_attention, cuDNN and flash backends, same shapes"
timeout 300 python3 scripts/compare_torch_attention.py run --lcm "$RES/attn/summary.json" \
  --out "$RES/torch_attention.json" --backends cudnn,flash
cp "$RES/torch_attention.json" "$OUT/" 2>/dev/null

TABLE_LCM=("$RES/attn/summary.json")
if [ "$MODE" = all ]; then
  lcm_run attn2
  cp "$RES/attn2/summary.json" "$OUT/attention_run2.json" 2>/dev/null
  TABLE_LCM+=("$RES/attn2/summary.json")
fi

section "comparison table"
python3 scripts/compare_torch_attention.py table --lcm "${TABLE_LCM[@]}" --torch "$RES/torch_attention.json" \
  --out "$RES/comparison_attention.md"
cp "$RES/comparison_attention.md" "$OUT/" 2>/dev/null

# The same binary on the system's cuDNN, when that is another library than the one it ran on.
LCM_CUDNN_V=$(python3 -c "import json; j=json.load(open('$RES/attn/summary.json')); print(j['points'][0]['extra']['cudnn']['cudnn_runtime'])" 2>/dev/null)
SYS_CUDNN_LIB=$(ldconfig -p | awk '/libcudnn\.so\.9 /{print $NF; exit}')
SYS_CUDNN_H=$(ls /usr/include/x86_64-linux-gnu/cudnn_version.h /usr/include/cudnn_version.h /usr/local/cuda/include/cudnn_version.h 2>/dev/null | head -1)
SYS_CUDNN_V=$([ -n "$SYS_CUDNN_H" ] && grep -h -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' "$SYS_CUDNN_H" | awk '{printf "%s%s", s, $3; s="."}')
echo "cuDNN: lcm-exec ran on ${LCM_CUDNN_V:-?}; system library ${SYS_CUDNN_LIB:-none} (${SYS_CUDNN_V:-?})"
if [ "$MODE" = all ] && [ -n "$SYS_CUDNN_LIB" ] && [ -n "$SYS_CUDNN_V" ] && [ "$SYS_CUDNN_V" != "$LCM_CUDNN_V" ] &&
   [ "$(elapsed)" -lt "${LCM_SYSTEM_PASS_BEFORE_S:-200}" ]; then
  SAVED_SHAPES=$SHAPES
  SHAPES=1x4Kx32x8x128,1x8Kx32x8x128,1x16Kx32x8x128,1x32Kx32x8x128,1x64Kx32x8x128,1x128Kx32x8x128
  lcm_run attn_system_cudnn -x LD_LIBRARY_PATH="$(dirname "$SYS_CUDNN_LIB"):${LD_LIBRARY_PATH:-}"
  SHAPES=$SAVED_SHAPES
  cp "$RES/attn_system_cudnn/summary.json" "$OUT/attention_system_cudnn.json" 2>/dev/null
  python3 scripts/compare_torch_attention.py table --lcm "$RES/attn_system_cudnn/summary.json" \
    --torch "$RES/torch_attention.json" --out "$RES/comparison_attention_system_cudnn.md" > /dev/null
  { echo; echo "## The same lcm-exec binary on the system's cuDNN $SYS_CUDNN_V (torch on its own)"; echo;
    sed 1d "$RES/comparison_attention_system_cudnn.md"; } >> "$RES/comparison_attention.md"
  cp "$RES/comparison_attention.md" "$OUT/" 2>/dev/null
  tail -25 "$RES/comparison_attention.md"
fi

section collect
tar -C "$RES" -czf "$OUT/attention_results.tar.gz" . 2>/dev/null
ls -la "$OUT"
section done
sleep 1  # let tee flush the log
