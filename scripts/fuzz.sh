#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) and runs each for SECONDS on its
# committed seed corpus (fuzz/corpus/<target>/) with its dictionary (fuzz/dict/). CI's smoke:
#   scripts/fuzz.sh 15
# Usage: scripts/fuzz.sh SECONDS [TARGET...]   (default: every target)
# Environment: LCM_FUZZ_BUILD (build directory, default build-fuzz), LCM_FUZZ_ARGS (extra
# libFuzzer flags, e.g. "-runs=10000000" for a long run). Inputs the fuzzer finds go to
# $LCM_FUZZ_BUILD/corpus/<target>/ (the committed corpus is only read); a crash, sanitizer
# report, leak or broken property leaves $LCM_FUZZ_BUILD/artifacts/<target>-crash-* and
# makes the script exit non-zero after the other targets ran. Reproduce one with
#   build-fuzz/bin/<target> build-fuzz/artifacts/<target>-crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(scenario_fuzz set_fuzz profile_fuzz megatron_argv_fuzz megatron_yaml_fuzz exec_json_fuzz nccl_log_fuzz)
fi
build=${LCM_FUZZ_BUILD:-build-fuzz}

# Longest input per target: a little above its largest seed.
declare -A max_len=([scenario_fuzz]=8192 [set_fuzz]=1024 [profile_fuzz]=16384 [megatron_argv_fuzz]=8192
                    [megatron_yaml_fuzz]=8192 [exec_json_fuzz]=16384 [nccl_log_fuzz]=4096)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DLCM_BUILD_FUZZERS=ON -DLCM_BUILD_TESTS=OFF -DLCM_BUILD_BENCHMARKS=OFF -DLCM_BUILD_EXECUTOR=OFF \
    -DLCM_BUILD_GUI=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target lcm_fuzzers

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/artifacts"
failed=()
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "scripts/fuzz.sh: unknown target '$t'" >&2; exit 2; }
  mkdir -p "$build/corpus/$t"
  log="$build/artifacts/$t.log"
  # shellcheck disable=SC2086  # LCM_FUZZ_ARGS is a list of flags
  if "$build/bin/$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=5 -rss_limit_mb=2048 \
       -dict="fuzz/dict/$t.dict" -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 \
       ${LCM_FUZZ_ARGS:-} "$build/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  # "#RUNS ... cov: N ... exec/s: N" (plain mode: the last status line; -fork=N mode: the job lines).
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
  per_s=$(sed -nE 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"$last")
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  printf '%-20s %-6s runs %-10s exec/s %-7s cov %s\n' "$t" "$status" "${runs:-?}" "${per_s:-?}" "${cov:-?}"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  for t in "${failed[@]}"; do
    echo "--- $t ($build/artifacts/$t.log):" >&2
    grep -E -m1 -A25 'ERROR: |runtime error|PROPERTY FAILED|deadly signal|uncaught exception|terminate called' \
      "$build/artifacts/$t.log" >&2 || tail -30 "$build/artifacts/$t.log" >&2
  done
  exit 1
fi
