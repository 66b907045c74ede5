#!/usr/bin/env bash
# One call on the 2 x H200 device machine (nvidia-h200-x2): build lcm-exec, then measure
# the calibration inputs whose timing the stream gate changed (executor/src/infra/hold.cuh):
# every collective on tp=2 from 64 KiB to 1 GiB and device copies from 1 MiB to 4 GiB,
# plus torch.distributed's bus bandwidth on the same sizes >= 64 MiB (the gate must not
# move large messages). Leaves in $OUT: device_log.txt, the summary.json of each run and
# torch_coll.json. Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_calibration.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
RES=$ROOT/build/device-results
rm -rf "$RES"; mkdir -p "$RES"
exec > >(tee -a "$OUT/device_log.txt") 2>&1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export PYTHONUNBUFFERED=1
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
MPI="mpirun --allow-run-as-root --bind-to none"
EXE=$ROOT/build/bin/lcm-exec

section environment
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
section "configure + build lcm-exec"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF \
  -DLCM_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$RES/configure.log" 2>&1 || tail -30 "$RES/configure.log"
ninja -C build -j 32 lcm-exec 2>&1 | tail -5

section "collectives on tp=2, 64K..1G, stream-gated timing"
timeout 240 $MPI -np 2 "$EXE" bench collectives --layout tp=2 --group tp -b 64K -e 1G -f 2 --out "$RES/coll"
cp "$RES/coll/summary.json" "$OUT/collectives_tp2_gated.json"
section "membw 1M..4G, stream-gated timing"
timeout 120 $MPI -np 1 "$EXE" bench membw -b 1M -e 4G -f 4 --out "$RES/membw"
cp "$RES/membw/summary.json" "$OUT/membw_gated.json"
section "torch.distributed on the same sizes (>= 64 MiB rows of the comparison)"
timeout 150 python3 scripts/compare_torch.py coll --lcm "$RES/coll/summary.json" --out "$OUT/torch_coll_gated.json"
section done
