#!/usr/bin/env bash
# Writes every output of `lcm estimate/plan/sweep/comm/capacity/scaling/trace` for all bundled
# scenarios in all formats into OUT_DIR, with run-dependent fields (wall time, thread
# counts, layouts/s) masked, so that two builds can be compared with `diff -r`:
#
#   scripts/golden_outputs.sh build/bin/lcm /tmp/before     # on the old commit
#   scripts/golden_outputs.sh build/bin/lcm /tmp/after      # on the new one
#   diff -r /tmp/before /tmp/after
#
# Used to show that refactors change no result (docs/architecture.md).
set -uo pipefail
lcm=${1:?usage: golden_outputs.sh LCM_BINARY OUT_DIR}
out=${2:?usage: golden_outputs.sh LCM_BINARY OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"

# Masks what differs from run to run: durations, rates and thread counts.
mask() {
  sed -E \
    -e 's/([0-9]+(\.[0-9]+)?) ?(s|ms|µs|us) (wall|CPU)/<t> \4/g' \
    -e 's/"(elapsed_s|search_s|wall_s|cpu_s|seconds|layouts_per_s|threads)": *[0-9.eE+-]+/"\1": <t>/g' \
    -e 's/(searched|evaluated) ([0-9,]+ layouts) in [0-9.]+ ?(s|ms)( \([0-9.,]+ ?[kM]? ?layouts\/s\))?/\1 \2 in <t>/g' \
    -e 's/in [0-9.]+ ?(s|ms) on [0-9]+ threads?/in <t> on <n> threads/g' \
    -e 's/[0-9.]+ ?[kM]? layouts\/s/<r> layouts\/s/g'
}

run() {  # run NAME ARGS...: stdout+stderr and exit code into $out/NAME
  local name=$1; shift
  { "$lcm" "$@" 2>&1; echo "exit $?"; } | mask > "$out/$name"
}

fmts=(table md json csv)
for sc in scenarios/*.yaml; do
  n=$(basename "$sc" .yaml)
  for f in "${fmts[@]}"; do
    run "$n.estimate.$f" estimate "$sc" --format "$f"
    run "$n.comm.$f" comm "$sc" --format "$f"
    run "$n.scaling.$f" scaling "$sc" --format "$f"
    run "$n.capacity.$f" capacity "$sc" --format "$f"
    run "$n.plan.$f" plan "$sc" --format "$f" -q --threads 1
  done
  "$lcm" trace "$sc" -o "$out/$n.trace.json" > "$out/$n.trace.log" 2>&1; echo "exit $?" >> "$out/$n.trace.log"
  "$lcm" trace "$sc" --detail layer -o "$out/$n.trace-layer.json" > /dev/null 2>&1
done
for f in "${fmts[@]}"; do
  run "sweep.mixtral.$f" sweep scenarios/mixtral-8x7b.yaml --vary seq_length=4K,32K,128K --format "$f" -q --threads 1
  run "sweep.llama.$f" sweep scenarios/llama3.1-70b.yaml --vary seq_length=8K,1M --format "$f" -q --threads 1
done
run plan.mixtral.1024 plan scenarios/mixtral-8x7b.yaml --gpus 1024 --set seq_length=128K -q --threads 1
run plan.dsv3.json plan scenarios/deepseek-v3.yaml --format json -q --threads 1
run estimate.llama70b.cp8 estimate scenarios/llama3.1-70b.yaml --set context_parallel_size=8 --set seq_length=128K
run capacity.mixtral.skew capacity scenarios/mixtral-8x7b.yaml --cf 1.0,1.25,1.5,2.0 --skew zipf:1.0
# lcm compare on the committed fixture (docs/compare.md).
for f in "${fmts[@]}"; do
  run "compare.fixture.$f" compare scenarios/llama3.1-8b.yaml tests/data/compare --format "$f"
done
"$lcm" compare scenarios/llama3.1-8b.yaml tests/data/compare --trace-out "$out/compare.fixture.trace.json" > /dev/null 2>&1
echo "wrote $(ls "$out" | wc -l) files to $out"
