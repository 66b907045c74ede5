#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang) and runs them for SECONDS on their committed
# seed corpus (fuzz/corpus/<target>/) with their dictionary (fuzz/dict/), then prints one
# table of executions per target (docs/reliability.md).
#   scripts/fuzz.sh 10                                   CI's smoke (.ci/run): ASan + UBSan, one target after another
#   scripts/fuzz.sh --ubsan --cores 16 --out DIR 3600    a campaign: UBSan only, every target at once
# Usage: scripts/fuzz.sh [--ubsan] [--cores N] [--build-only] [--out DIR] SECONDS [TARGET...]
#   --ubsan       libFuzzer + UndefinedBehaviorSanitizer only (build-fuzz-ubsan/): several times the
#                 executions per second of the ASan build; still stops on a crash, an abort, an
#                 escaping exception, a broken property or undefined behaviour (not on a heap
#                 overflow or a leak that does not crash: the CI smoke keeps ASan for those)
#   --cores N     every target at once, N independent worker processes in all on each target's
#                 corpus directory (a worker stops at its first finding, the others go on), the slow targets
#                 getting more (without it: one target at a time, one process, as CI runs it)
#   --build-only  configure and build, run nothing (SECONDS is still required)
#   --out DIR     logs, crash inputs (<target>-crash-...) and totals.txt go there
#                 (default: the build directory's artifacts/)
# Environment: LCM_FUZZ_BUILD (build directory), LCM_FUZZ_ARGS (extra libFuzzer flags),
# LCM_FUZZ_WORKERS ("TARGET=N ...": workers of those targets with --cores, instead of the split by cost),
# LCM_FUZZ_NO_BUILD=1 (run $LCM_FUZZ_BUILD/bin/* as they are: scripts/device_fuzz_campaign.sh). New
# inputs go to $LCM_FUZZ_BUILD/corpus/<target>/ (the committed corpus is only read). Any crash,
# sanitizer report, leak, timeout (> 5 s) or broken property leaves <target>-crash-* (or leak-,
# timeout-, oom-) in the output directory and makes the script exit 1 after every target ran.
# Reproduce with build-fuzz/bin/<target> FILE.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/fuzz.sh [--ubsan] [--cores N] [--build-only] [--out DIR] SECONDS [TARGET...]" >&2
  exit 2
}
sanitizers="address,undefined" cores=0 out="" build_only=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --ubsan) sanitizers=undefined; shift ;;
    --cores) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; cores=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --out) [[ -n ${2:-} ]] || usage; out=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage  # libFuzzer reads -max_total_time=0 as "no limit"
seconds=$1
shift
all=(scenario_fuzz set_fuzz profile_fuzz megatron_argv_fuzz megatron_yaml_fuzz exec_json_fuzz nccl_log_fuzz)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
if [[ $sanitizers == undefined ]]; then build=${LCM_FUZZ_BUILD:-build-fuzz-ubsan}; else build=${LCM_FUZZ_BUILD:-build-fuzz}; fi
out=${out:-$build/artifacts}

# Longest input per target: a little above its largest seed.
declare -A max_len=([scenario_fuzz]=8192 [set_fuzz]=1024 [profile_fuzz]=16384 [megatron_argv_fuzz]=8192
                    [megatron_yaml_fuzz]=8192 [exec_json_fuzz]=16384 [nccl_log_fuzz]=4096)
# Relative CPU cost of one execution (UBSan build; the session-7 campaign's CPU s per execution
# on the device machine, scaled by the session-8 speed-ups, docs/reliability.md#throughput):
# --cores gives each target one worker, then the rest one at a time to the target with the most
# cost per worker.
declare -A cost=([scenario_fuzz]=10 [set_fuzz]=6 [profile_fuzz]=6 [megatron_argv_fuzz]=11
                 [megatron_yaml_fuzz]=17 [exec_json_fuzz]=2 [nccl_log_fuzz]=5)
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "scripts/fuzz.sh: unknown target '$t' (one of: ${all[*]})" >&2; exit 2; }
done

if [[ ${LCM_FUZZ_NO_BUILD:-0} != 1 ]]; then  # 1: $LCM_FUZZ_BUILD/bin holds fuzzers built elsewhere
  command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (Debian 12: apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  if [[ ! -f $build/CMakeCache.txt ]]; then
    CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
      -DLCM_BUILD_FUZZERS=ON -DLCM_FUZZ_SANITIZERS="$sanitizers" -DLCM_BUILD_TESTS=OFF -DLCM_BUILD_BENCHMARKS=OFF \
      -DLCM_BUILD_EXECUTOR=OFF -DLCM_BUILD_GUI=OFF >/dev/null
  fi
  cmake --build "$build" -j"$(nproc)" --target lcm_fuzzers
fi
((build_only)) && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Workers per target (--cores).
declare -A workers=()
if ((cores > 0)); then
  left=$cores
  for t in "${targets[@]}"; do workers[$t]=1; left=$((left - 1)); done
  while ((left > 0)); do
    best=${targets[0]}
    for t in "${targets[@]}"; do
      ((cost[$t] * workers[$best] > cost[$best] * workers[$t])) && best=$t
    done
    workers[$best]=$((workers[$best] + 1))
    left=$((left - 1))
  done
  # LCM_FUZZ_WORKERS="TARGET=N ..." sets some targets' workers instead (e.g. by the executions
  # each still needs); the total may then differ from --cores.
  for tw in ${LCM_FUZZ_WORKERS:-}; do
    [[ $tw =~ ^([a-z_]+)=([1-9][0-9]*)$ && -n ${workers[${BASH_REMATCH[1]}]:-} ]] ||
      { echo "scripts/fuzz.sh: LCM_FUZZ_WORKERS: expected TARGET=N with one of the targets run, got '$tw'" >&2; exit 2; }
    workers[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  done
fi

run_target() {  # TARGET: its libFuzzer run(s); output in $out/TARGET.log (--cores: $out/TARGET.N.log per worker)
  local t=$1 n=1 i log
  ((cores > 0)) && n=${workers[$t]}
  mkdir -p "$build/corpus/$t"
  # --cores: N independent libFuzzer processes on the same corpus directory (each reloads what
  # the others add, libFuzzer's -reload), not -fork=N: fork mode restarts its workers in jobs of
  # 1, 2, 3 ... s, and each start (corpus load, libFuzzer's tables) cost a third of the
  # executions per CPU second in a 45 s comparison (docs/reliability.md#throughput). A worker
  # stops at its first crash, timeout or OOM (kept in $out); the others go on.
  local pids=()
  for ((i = 0; i < n; i++)); do
    log=$out/$t.log
    ((cores > 0)) && log=$out/$t.$i.log
    # CPU seconds (user + system) in $out/TARGET[.N].cpu where GNU time is installed.
    local timer=()
    [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f '%U %S' -o "${log%.log}.cpu")
    # shellcheck disable=SC2086  # LCM_FUZZ_ARGS is a list of flags
    "${timer[@]}" "$build/bin/$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=5 -rss_limit_mb=2048 \
      -dict="fuzz/dict/$t.dict" -artifact_prefix="$out/$t-" -print_final_stats=1 ${LCM_FUZZ_ARGS:-} \
      "$build/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for i in "${pids[@]}"; do wait "$i" || rc=$?; done
  return $rc
}

start=$(date +%s)
declare -A rc=()
if ((cores > 0)); then
  declare -A pid=()
  for t in "${targets[@]}"; do
    run_target "$t" &
    pid[$t]=$!
  done
  for t in "${targets[@]}"; do
    if wait "${pid[$t]}"; then rc[$t]=0; else rc[$t]=$?; fi
  done
else
  for t in "${targets[@]}"; do
    if run_target "$t"; then rc[$t]=0; else rc[$t]=$?; fi
  done
fi
wall=$(($(date +%s) - start))
built_with=$(sed -n 's/^LCM_FUZZ_SANITIZERS:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)

# One row per target: the sum over its workers of libFuzzer's final
# "stat::number_of_executed_units" (or, for a worker stopped by a finding before it printed
# them, its last "#RUNS" line), the largest "cov:" of a worker, the seconds of the run, and the
# CPU seconds of the workers; findings are the inputs kept in $out.
failed=()
{
  printf '%-20s %-7s %8s %14s %9s %11s %7s  %s\n' target status workers executions exec/s exec/cpu-s cov findings
  total=0
  for t in "${targets[@]}"; do
    runs=0 cov=0 cpu=0
    for log in "$out/$t.log" "$out/$t".[0-9]*.log; do
      [[ -f $log ]] || continue
      r=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
      [[ -n $r ]] || r=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -nE 's/^#([0-9]+).*/\1/p' || true)
      runs=$((runs + ${r:-0}))
      c=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 | sed -nE 's/.* cov: ([0-9]+).*/\1/p' || true)
      ((${c:-0} > cov)) && cov=$c
      [[ -f ${log%.log}.cpu ]] && cpu=$(awk -v a="$cpu" 'NF == 2 {printf "%.2f", a + $1 + $2; exit}' "${log%.log}.cpu")
    done
    secs=$seconds
    counts=""
    found=$(find "$out" -maxdepth 1 -name "$t-*" ! -name "$t.log" | wc -l)
    status=ok
    if [[ ${rc[$t]} -ne 0 || $found -gt 0 ]]; then status=FAILED; failed+=("$t"); fi
    per_s=$((runs / (secs > 0 ? secs : 1)))
    per_cpu=$(awk -v r="$runs" -v c="$cpu" 'BEGIN {if (c > 0) printf "%d", r / c; else printf "?"}')
    total=$((total + runs))
    printf '%-20s %-7s %8s %14s %9s %11s %7s  %s\n' "$t" "$status" "${workers[$t]:-1}" "$runs" "$per_s" \
      "$per_cpu" "$cov" "$found"
  done
  printf '%-20s %-7s %8s %14s   (%s s per target, %s s wall, fuzzers with %s, %s cores here, %s)\n' all "" \
    "$((cores > 0 ? cores : 1))" "$total" "$seconds" "$wall" "${built_with:-$sanitizers}" "$(nproc)" "$(date -u +%FT%TZ)"
} >"$out/totals.txt"  # not a pipe: `failed` must stay in this shell
cat "$out/totals.txt"

if [[ ${#failed[@]} -gt 0 ]]; then
  for t in "${failed[@]}"; do
    echo "--- $t ($out/$t.log):" >&2
    for log in "$out/$t.log" "$out/$t".[0-9]*.log; do
      [[ -f $log ]] || continue
      grep -E -m1 -A25 'ERROR: |runtime error|PROPERTY FAILED|deadly signal|uncaught exception|terminate called' "$log" >&2 || true
    done
    find "$out" -maxdepth 1 -name "$t-*" ! -name "$t.log" -printf '  input: %p\n' >&2
  done
  exit 1
fi
