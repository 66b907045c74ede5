# Sourced by the one-GPU device scripts (device_run_heldout.sh, device_run_replay.sh): their
# shared setup and lcm-exec build. Not run on its own.
#   device_setup LOG RESULTS  ROOT, OUT (made), RES = build/RESULTS (made afresh), stdout and
#                             stderr also to $OUT/LOG, PATH, Open MPI's root permission, MPI
#                             (one rank), EXE (lcm-exec), T0 for section()
#   device_build              the GPU line of nvidia-smi, configure (sm_90, no GUI or benchmarks;
#                             PyTorch's cuDNN where its wheel has headers) and ninja of
#                             ${LCM_TARGETS:-lcm-exec}
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }

device_setup() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cd "$ROOT" || exit 1
  OUT=${OUT:-$ROOT/device-out}
  mkdir -p "$OUT"
  RES=$ROOT/build/$2
  rm -rf "$RES"; mkdir -p "$RES"
  exec > >(tee -a "$OUT/$1") 2>&1
  export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  T0=$(date +%s)
  MPI="mpirun --allow-run-as-root --bind-to none -np 1"
  EXE=$ROOT/build/bin/lcm-exec
}

device_build() {
  section environment
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu,memory.total --format=csv
  local args=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF
              -DCMAKE_CUDA_ARCHITECTURES=90 ${LCM_EXTRA_CMAKE:-})
  local cudnn
  cudnn=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
  if [ -f "$cudnn/include/cudnn_graph.h" ]; then
    args+=(-DCUDNN_ROOT="$cudnn"); export LD_LIBRARY_PATH="$cudnn/lib:${LD_LIBRARY_PATH:-}"
    echo "cuDNN: PyTorch's ($cudnn)"
  fi
  section "configure + build"
  cmake "${args[@]}" > "$RES/configure.log" 2>&1 || tail -30 "$RES/configure.log"
  ninja -C build -j 16 ${LCM_TARGETS:-lcm-exec} 2>&1 | tail -3
}
