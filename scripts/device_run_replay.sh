#!/usr/bin/env bash
# One call on a one-GPU device machine: build lcm-exec, then re-run on this GPU the lcm-exec
# benchmarks that produced committed summaries measured elsewhere (each summary records its
# command line), so that the same shapes are measured on another part (the H100 replay of
# H200 inputs: validation/measured/h100/DECLARATION.md).
#
# LIST names the summaries, one path per line relative to the repository root ('#' comments);
# each is replayed with its own arguments, --out replaced, and its new summary lands in
# $OUT/replay/ under the same path with validation/measured/h200/ taken off. Replays start in
# list order until DEADLINE seconds (default 520) have passed since the call began; the rest are
# logged as not started, so a later call can take them (SKIP_DONE=DIR skips paths already in DIR).
# Leaves in $OUT: replay_log.txt and replay.tar.gz (the device tool returns few files per call).
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_replay.sh LIST...
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
DEADLINE=${DEADLINE:-520}
mkdir -p "$OUT/replay"
RES=$ROOT/build/replay-results
rm -rf "$RES"; mkdir -p "$RES"
exec > >(tee -a "$OUT/replay_log.txt") 2>&1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
MPI="mpirun --allow-run-as-root --bind-to none -np 1"
EXE=$ROOT/build/bin/lcm-exec
[ $# -ge 1 ] || { echo "usage: OUT=DIR bash scripts/device_run_replay.sh LIST..." >&2; exit 2; }

section environment
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu,memory.total --format=csv
CMAKE_ARGS=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_BENCHMARKS=OFF
            -DCMAKE_CUDA_ARCHITECTURES=90 ${LCM_EXTRA_CMAKE:-})
TORCH_CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
if [ -f "$TORCH_CUDNN_DIR/include/cudnn_graph.h" ]; then
  CMAKE_ARGS+=(-DCUDNN_ROOT="$TORCH_CUDNN_DIR"); export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"
  echo "cuDNN: PyTorch's ($TORCH_CUDNN_DIR)"
fi
section "configure + build"
cmake "${CMAKE_ARGS[@]}" > "$RES/configure.log" 2>&1 || tail -30 "$RES/configure.log"
ninja -C build -j 16 ${LCM_TARGETS:-lcm-exec} 2>&1 | tail -3

# The replayed arguments: the recorded command line after "lcm-exec", without its --out.
replay_args() {
  python3 - "$1" <<'PY'
import json, shlex, sys
argv = shlex.split(json.load(open(sys.argv[1]))["command_line"])
i = next(k for k, a in enumerate(argv) if a.endswith("lcm-exec"))
args, out = argv[i + 1:], []
skip = False
for a in args:
    if skip: skip = False; continue
    if a == "--out": skip = True; continue
    if a.startswith("--out="): continue
    out.append(a)
print("\n".join(out))
PY
}

n=0; started=0; skipped=0
for list in "$@"; do
  while IFS= read -r path; do
    path=${path%%#*}; path=$(echo "$path" | xargs)
    [ -n "$path" ] || continue
    rel=${path#validation/measured/h200/}
    if [ -n "${SKIP_DONE:-}" ] && [ -f "$SKIP_DONE/$rel" ]; then continue; fi
    if [ ! -f "$path" ]; then echo "missing input: $path"; continue; fi
    if [ $(( $(date +%s) - T0 )) -ge "$DEADLINE" ]; then
      echo "not started (deadline ${DEADLINE}s): $path"; skipped=$((skipped + 1)); continue
    fi
    n=$((n + 1)); started=$((started + 1))
    mapfile -t ARGS < <(replay_args "$path")
    section "replay $rel: lcm-exec ${ARGS[*]}"
    dir=$RES/run$n
    if timeout 240 $MPI "$EXE" "${ARGS[@]}" --out "$dir" > "$dir.log" 2>&1 && [ -f "$dir/summary.json" ]; then
      mkdir -p "$OUT/replay/$(dirname "$rel")"
      cp "$dir/summary.json" "$OUT/replay/$rel"
      tail -2 "$dir.log"
    else
      echo "FAILED: $path"; tail -20 "$dir.log"
    fi
  done < "$list"
done
section "done: $started started, $skipped not started"
tar -C "$OUT" -czf "$OUT/replay.tar.gz" replay && rm -rf "$OUT/replay"
