#!/usr/bin/env bash
# The executor's host-side tests (lcm_executor_host_tests: option parsing, the binary's
# bad-command-line exits, writers, checkpoints, the indexed dataset reader, the compare reader,
# the CPU reference checkers) under AddressSanitizer + UndefinedBehaviorSanitizer with asserts
# on (docs/reliability.md). scripts/sanitize.sh leaves the executor out; this builds it in
# build-asan-exec: the C++ sources (model, planner, executor, tests, lcm-exec) instrumented, the
# CUDA sources (.cu) compiled by nvcc as usual and linked into the sanitized binaries.
# Needs CUDA, NCCL and MPI (the device machine); the GPU tests are not run here (their kernels
# ran under compute-sanitizer instead: scripts/device_run_gpu_checks.sh).
# Usage: scripts/sanitize_executor.sh   (environment: LCM_ASAN_EXEC_BUILD, default build-asan-exec)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${LCM_ASAN_EXEC_BUILD:-build-asan-exec}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DCMAKE_CUDA_ARCHITECTURES=90 ${CUDNN_ROOT:+-DCUDNN_ROOT="$CUDNN_ROOT"} \
  -DLCM_BUILD_EXECUTOR=ON -DLCM_BUILD_BENCHMARKS=OFF -DLCM_BUILD_GUI=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target lcm_executor_host_tests lcm-exec
built=$(date +%s)
# protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap would be (the
# binaries start CUDA even where a test then only checks the options). Leaks inside Open MPI's
# and the CUDA driver's own start-up are theirs, not lcm's: scripts/lsan_executor.supp.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan_executor.supp:print_suppressions=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
"$build/bin/lcm_executor_host_tests" --gtest_brief=1 || status=$?
end=$(date +%s)
echo "scripts/sanitize_executor.sh: build $((built - start)) s, tests $((end - built)) s, exit $status"
exit $status
