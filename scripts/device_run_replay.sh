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
DEADLINE=${DEADLINE:-520}
[ $# -ge 1 ] || { echo "usage: OUT=DIR bash scripts/device_run_replay.sh LIST..." >&2; exit 2; }
. "$(dirname "$0")/device_single_gpu.sh"
device_setup replay_log.txt replay-results
mkdir -p "$OUT/replay"
device_build

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
    if timeout 240 $MPI "$EXE" "${ARGS[@]}" --out "$dir" < /dev/null > "$dir.log" 2>&1 && [ -f "$dir/summary.json" ]; then
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
