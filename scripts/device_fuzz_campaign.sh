#!/usr/bin/env bash
# The long fuzz campaign, on the device machine's CPU cores (docs/reliability.md#campaigns): the
# seven fuzz targets at once for SECONDS, libFuzzer + UBSan (scripts/fuzz.sh --ubsan --cores N)
#), crashes counted and kept rather than ending a target. Leaves in OUT:
# totals.txt (executions per target), <target>.log, any crash/timeout/oom input
# (<target>-crash-...), campaign_log.txt and corpus_new.tar.gz (the inputs the campaign added,
# to carry into the next call's fuzz/corpus or build directory).
#
# Usage (device machine, repository root; one call runs at most ~8 minutes, so SECONDS <= 420
# leaves time for the build):
#   bash scripts/device_fuzz_campaign.sh OUT SECONDS [CORES [TARGET...]]   (CORES: default nproc;
#   TARGET: default all seven, e.g. only the slow ones once the fast ones have their executions)
# It builds the fuzzers there when clang++ with libFuzzer is installed (Ubuntu 24.04: clang,
# libclang-rt-18-dev, plus the build's usual cmake, ninja-build, libyaml-cpp-dev, libfmt-dev,
# nlohmann-json3-dev, libcli11-dev, libeigen3-dev). Without clang it runs fuzzers built on the
# development machine and carried in .fuzzcarry/ (make it there, then carry .fuzzcarry):
#   bash scripts/device_fuzz_campaign.sh --pack
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
targets=(scenario_fuzz set_fuzz profile_fuzz megatron_argv_fuzz megatron_yaml_fuzz exec_json_fuzz nccl_log_fuzz)

# A fuzzer can be built here: clang++ links -fsanitize=fuzzer,undefined.
can_build() {
  command -v clang++ >/dev/null && command -v cmake >/dev/null || return 1
  local d
  d=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$d/t.cpp"
  clang++ -fsanitize=fuzzer,undefined "$d/t.cpp" -o "$d/t" >"$d/log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] || sed 's/^/  clang++: /' "$d/log" | head -5 >&2
  rm -rf "$d"
  return $rc
}

if [[ ${1:-} == --pack ]]; then
  # Development machine: UBSan fuzzers, stripped, with the shared libraries they need that are
  # not in a plain Ubuntu image (yaml-cpp, fmt), and the source directory they read bundled
  # files from (compiled in as LCM_SOURCE_DIR).
  LCM_FUZZ_BUILD=build-fuzz-ubsan bash scripts/fuzz.sh --ubsan --build-only 1 || { echo "--pack: the UBSan fuzzers did not build" >&2; exit 1; }
  rm -rf .fuzzcarry && mkdir -p .fuzzcarry/bin .fuzzcarry/lib
  for t in "${targets[@]}"; do strip -o ".fuzzcarry/bin/$t" "build-fuzz-ubsan/bin/$t"; done
  ldd build-fuzz-ubsan/bin/scenario_fuzz | awk '/libyaml-cpp|libfmt/ {print $3}' | xargs -r cp -L -t .fuzzcarry/lib
  echo "$ROOT" >.fuzzcarry/source_dir
  du -sh .fuzzcarry
  exit 0
fi

[[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/device_fuzz_campaign.sh OUT SECONDS [CORES [TARGET...]] | --pack" >&2; exit 2; }
OUT=$1 SECONDS_=$2 CORES=${3:-$(nproc)}
shift $(($# >= 3 ? 3 : 2))
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/campaign_log.txt") 2>&1
echo "device_fuzz_campaign: $(date -u +%FT%TZ), $(nproc) cores, $CORES workers, $SECONDS_ s; $(uname -sr)"
grep -h PRETTY_NAME /etc/os-release 2>/dev/null

build=build-fuzz-ubsan
export -n LCM_FUZZ_NO_BUILD
if [[ ${LCM_FUZZ_USE_CARRIED:-0} != 1 ]] && can_build; then  # LCM_FUZZ_USE_CARRIED=1: .fuzzcarry even with clang
  clang++ --version | head -1
  for tool in ninja; do command -v $tool >/dev/null || { echo "device_fuzz_campaign: $tool not found" >&2; exit 2; }; done
  t0=$(date +%s)
  if ! LCM_FUZZ_BUILD=$build bash scripts/fuzz.sh --ubsan --build-only 1 >"$OUT/build_log.txt" 2>&1; then
    tail -30 "$OUT/build_log.txt"
    echo "device_fuzz_campaign: building the fuzzers failed (build_log.txt); missing -dev packages?" >&2
    exit 2
  fi
  echo "build: $(($(date +%s) - t0)) s"
elif [[ -d .fuzzcarry/bin ]]; then
  echo "clang++ with libFuzzer not usable here; running the carried fuzzers in .fuzzcarry/"
  for t in "${targets[@]}"; do [[ -x .fuzzcarry/bin/$t ]] || { echo "device_fuzz_campaign: .fuzzcarry/bin/$t missing" >&2; exit 2; }; done
  src=$(cat .fuzzcarry/source_dir)
  # The fuzzers read scenarios/ and hwprofiles/ from the source directory they were built in.
  if [[ $src != "$ROOT" && ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -sfn "$ROOT" "$src"; fi
  export LD_LIBRARY_PATH=$ROOT/.fuzzcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LCM_FUZZ_NO_BUILD=1
  build=.fuzzcarry
  if ! .fuzzcarry/bin/nccl_log_fuzz -runs=1 fuzz/corpus/nccl_log_fuzz >"$OUT/carried_check.txt" 2>&1; then
    tail -5 "$OUT/carried_check.txt"
    echo "device_fuzz_campaign: the carried fuzzers do not run here (carried_check.txt)" >&2
    exit 2
  fi
else
  echo "device_fuzz_campaign: no clang++ with libFuzzer here (Ubuntu 24.04: apt-get install clang libclang-rt-18-dev)" >&2
  echo "  and no carried fuzzers: on the development machine run 'bash scripts/device_fuzz_campaign.sh --pack'" >&2
  echo "  and carry .fuzzcarry with the call" >&2
  exit 2
fi

before=$(find "$build/corpus" -type f 2>/dev/null | wc -l)
LCM_FUZZ_BUILD=$build bash scripts/fuzz.sh --ubsan --cores "$CORES" --out "$OUT" "$SECONDS_" "$@"
status=$?
after=$(find "$build/corpus" -type f 2>/dev/null | wc -l)
tar czf "$OUT/corpus_new.tar.gz" -C "$build" corpus 2>/dev/null
echo "corpus: $before -> $after inputs in $build/corpus ($(du -h "$OUT/corpus_new.tar.gz" | cut -f1) in corpus_new.tar.gz)"
echo "device_fuzz_campaign: scripts/fuzz.sh exit $status ($(date -u +%FT%TZ))"
exit $status
