#!/usr/bin/env bash
# One call on the 2 x H200 device machine (nvidia-h200-x2): build lcm-exec and its tests,
# run the GPU tests, the measurements (membw, gemm, collectives) and the PyTorch comparison,
# and leave at most 8 files in $OUT:
#   device_log.txt, comparison.md, torch_gemm.json, torch_coll.json, results.tar.gz (every
#   summary.csv/json and trace) and the summary.json of the two gemm runs and of collectives.
# Every step is time-boxed and the script goes on after a failed step, so one call always
# brings back what it could measure. Usage (device machine, repository root):
#   OUT=/tmp/out bash scripts/device_run.sh [all|verify]
# `verify` skips the long comparison and keeps: the tests, membw, an fp8 algorithm sweep
# and the failure drills (its $OUT: log, results.tar.gz, membw and fp8-sweep summaries).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
RES=$ROOT/build/device-results
rm -rf "$RES"
mkdir -p "$RES"
exec > >(tee -a "$OUT/device_log.txt") 2>&1
MODE=${1:-all}

export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export PYTHONUNBUFFERED=1
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
MPI="mpirun --allow-run-as-root --bind-to none"
EXE=$ROOT/build/bin/lcm-exec
keep() { [ -f "$RES/$1/summary.json" ] && cp "$RES/$1/summary.json" "$OUT/$1_summary.json"; }

section environment
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
nvidia-smi topo -m
nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1; mpirun --version | head -1
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
  [ -f "$h" ] && echo "$h: $(grep -h -E '^#define NCCL_(MAJOR|MINOR|PATCH)' "$h" | awk '{printf "%s ", $3}')"
done
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
env | grep -E '^(NCCL|CUDA|TORCH)_' | sort

section configure
CMAKE_ARGS=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF
            -DCMAKE_CUDA_ARCHITECTURES=90)
if ! cmake "${CMAKE_ARGS[@]}" > "$RES/configure.log" 2>&1; then
  tail -5 "$RES/configure.log"
  # An image without the Debian-packaged C++ libraries the project uses: unpack Debian 12's
  # (outside /) from .devdeps, an ignored folder filled on a Debian 12 machine with
  #   apt-get download libgtest-dev libgmock-dev nlohmann-json3-dev libyaml-cpp-dev \
  #     libyaml-cpp0.7 libfmt-dev libfmt9 libcli11-dev
  # and carried with the call. The 2026-11 image has them all; this path was not needed.
  echo "configure failed on the image's packages; retrying with the carried .devdeps"
  mkdir -p /tmp/devdeps
  for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
  rm -rf build/CMakeCache.txt build/CMakeFiles
  cmake "${CMAKE_ARGS[@]}" -DCMAKE_PREFIX_PATH=/tmp/devdeps/usr > "$RES/configure.log" 2>&1 || { tail -30 "$RES/configure.log"; }
fi
grep -E "lcm-exec|NCCL|MPI" "$RES/configure.log"

section build
time ninja -C build -j 32 lcm-exec lcm_executor_host_tests lcm_executor_gpu_tests 2>&1 | tail -25
ls -la build/bin/

section "host and single-GPU tests"
timeout 120 build/bin/lcm_executor_host_tests 2>&1 | tail -4
CUBLASLT_LOG_LEVEL=1 timeout 150 build/bin/lcm_executor_gpu_tests --gtest_filter='-MpirunTwoGpus.*' 2>&1 | grep -vE '^\[ RUN' | tail -40

section "membw (2 ranks, one per GPU)"
timeout 120 $MPI -np 2 "$EXE" bench membw -b 1M -e 4G -f 4 --out "$RES/membw"
[ "$MODE" = verify ] && keep membw

if [ "$MODE" = verify ]; then
  section "fp8 GEMM 4096x8192x28672: the heuristic's first 16 candidates (1 rank)"
  timeout 120 $MPI -np 1 "$EXE" bench gemm --shapes 4096x8192x28672 --dtype fp8 --algos 16 --out "$RES/gemm_fp8_algos16"
  keep gemm_fp8_algos16
  python3 - "$RES/gemm_fp8_algos16/summary.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    print(p["shape"], p["dtype"], round(p["tflops"], 1), "TFLOP/s with", p["extra"]["algo"])
PY
fi

if [ "$MODE" = all ]; then

# GEMM: lcm-exec, torch, torch, lcm-exec (A-B-B-A), so that neither side gets the cooler GPU.
section "gemm run 1: lcm-exec bf16 + fp8, model shapes, heuristic first choice (1 rank)"
timeout 150 $MPI -np 1 "$EXE" bench gemm --shapes models --dtype bf16,fp8 --out "$RES/gemm"; keep gemm
mkdir -p "$RES/compare"
section "gemm: torch.matmul / torch._scaled_mm, 2 passes"
timeout 200 python3 scripts/compare_torch.py gemm --lcm "$RES/gemm/summary.json" --passes 2 --out "$RES/compare/torch_gemm.json"
section "gemm run 2: lcm-exec again"
timeout 150 $MPI -np 1 "$EXE" bench gemm --shapes models --dtype bf16,fp8 --out "$RES/gemm2"; keep gemm2

section "collectives on tp=2 (2 ranks), 1M..1G"
timeout 180 $MPI -np 2 "$EXE" bench collectives --layout tp=2 --group tp -b 1M -e 1G -f 2 --out "$RES/coll"; keep coll

TORCH_NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
if [ -n "$TORCH_NCCL_LIB" ] && [ -f "$TORCH_NCCL_LIB/libnccl.so.2" ]; then
  section "collectives again, linked at run time against torch's NCCL ($TORCH_NCCL_LIB)"
  timeout 120 $MPI -np 2 -x LD_LIBRARY_PATH="$TORCH_NCCL_LIB:${LD_LIBRARY_PATH:-}" "$EXE" bench collectives \
    --layout tp=2 --group tp --ops all_reduce,all_gather,reduce_scatter,all_to_all -b 64M -e 1G -f 2 --out "$RES/coll_torchnccl"
fi

section "collectives: torch.distributed (NCCL backend, mp.spawn, 2 processes)"
timeout 150 python3 scripts/compare_torch.py coll --lcm "$RES/coll/summary.json" --out "$RES/compare/torch_coll.json"

section "comparison table"
python3 scripts/compare_torch.py table --lcm-gemm "$RES/gemm/summary.json" "$RES/gemm2/summary.json" \
  --torch-gemm "$RES/compare/torch_gemm.json" --lcm-coll "$RES/coll/summary.json" \
  --torch-coll "$RES/compare/torch_coll.json" --lcm-coll-alt "$RES/coll_torchnccl/summary.json" \
  --out "$RES/compare/comparison.md"
cp "$RES/compare/comparison.md" "$RES/compare/torch_gemm.json" "$RES/compare/torch_coll.json" "$OUT/" 2>/dev/null
fi  # MODE = all

# Failure drill: rank 1 sleeps 300 s before the timed loop; rank 0 must give up after
# --timeout 10 s, name the op and the rank that never arrived, write its results, abort.
for lib in system torch; do
  XL=()
  if [ "$lib" = torch ]; then
    [ -n "${TORCH_NCCL_LIB:-}" ] || TORCH_NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
    [ -f "$TORCH_NCCL_LIB/libnccl.so.2" ] || continue
    XL=(-x LD_LIBRARY_PATH="$TORCH_NCCL_LIB:${LD_LIBRARY_PATH:-}")
  fi
  section "failure drill: stall rank 1, --timeout 10 ($lib NCCL)"
  t1=$(date +%s%N)
  timeout 120 $MPI -np 2 "${XL[@]}" "$EXE" bench collectives --layout tp=2 --group tp --ops all_reduce -b 1M -e 1M \
    -w 2 -n 5 --timeout 10 --inject stall@rank=1,seconds=300 --out "$RES/stall_$lib" 2>&1 | grep -v -E '^\s*$'
  echo "drill ($lib NCCL): exit code ${PIPESTATUS[0]} after $(( ($(date +%s%N) - t1) / 1000000 )) ms"
  python3 -c "import json; j=json.load(open('$RES/stall_$lib/summary.json')); print('summary status:', j['status'], j.get('failure'))"
done

section "two-GPU tests (mpirun)"
timeout 200 build/bin/lcm_executor_gpu_tests --gtest_filter='MpirunTwoGpus.*' 2>&1 | grep -vE '^\[ RUN' | tail -150

section "collect"
tar -C "$RES" -czf "$OUT/results.tar.gz" . 2>/dev/null
ls -la "$OUT"
section done
sleep 1  # let tee flush the log
