#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (docs/reliability.md):
# configures build-asan (asserts on, -O1, the executor and benchmarks off, the GUI where Qt6 is
# found, its tests offscreen), builds everything and runs ctest. Any sanitizer report fails
# the test that triggered it (-fno-sanitize-recover=all, halt_on_error).
# Usage: scripts/sanitize.sh [TEST_TARGET...]   (default: build everything, run every test;
#        with targets, e.g. lcm_io_tests lcm_model_tests: build and run only those)
# Environment: LCM_ASAN_BUILD (build directory, default build-asan); CC/CXX pick the compiler;
# LCM_ASAN_PHASE=build (configure and build only) or test (run ctest on an existing build), for
# machines whose calls are time-limited (the device machine: one call builds, the next tests).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${LCM_ASAN_BUILD:-build-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
phase=${LCM_ASAN_PHASE:-all}
start=$(date +%s)
if [[ $phase != test ]]; then
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DLCM_BUILD_EXECUTOR=OFF -DLCM_BUILD_BENCHMARKS=OFF -DLCM_BUILD_GUI=ON >/dev/null
cmake --build "$build" -j"$(nproc)" ${1:+--target "$@"}
fi
built=$(date +%s)
if [[ $phase == build ]]; then echo "scripts/sanitize.sh: build $((built - start)) s"; exit 0; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export QT_QPA_PLATFORM=offscreen
status=0
# With targets, the tests of the executables not built are left out (gtest's *_NOT_BUILT and
# the plain QtTest executables).
skip=()
if [[ $# -gt 0 ]]; then
  skip=(-E "_NOT_BUILT")
  for t in lcm_gui_tests lcm_gui_timeline_tests lcm_gui_layout_tests lcm_plot_tests; do [[ -x $build/bin/$t ]] || skip[1]+="|^$t\$"; done
fi
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure "${skip[@]}" || status=$?
end=$(date +%s)
echo "scripts/sanitize.sh: build $((built - start)) s, tests $((end - built)) s, ctest exit $status"
exit $status
