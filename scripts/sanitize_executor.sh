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
# and the CUDA driver's own start-up are theirs, not lcm's: scripts/lsan_executor.supp. For those
# stacks to name their library, Open MPI keeps its components loaded until exit
# (mca_base_component_disable_dlclose) and LSan unwinds without frame pointers
# (fast_unwind_on_malloc=0: the system libraries have none). The tests count the lines a
# failing lcm-exec prints, so the suppressions used are listed once at the end instead.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:detect_stack_use_after_return=1}
supp="suppressions=$PWD/scripts/lsan_executor.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-$supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMPI_MCA_mca_base_component_disable_dlclose=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
"$build/bin/lcm_executor_host_tests" --gtest_brief=1 || status=$?
echo "--- what the suppressions hide, for one lcm-exec that starts MPI and exits 2:"
LSAN_OPTIONS=$supp:print_suppressions=1 "$build/bin/lcm-exec" bench collectives --layout tp=3 2>&1 || true
end=$(date +%s)
echo "scripts/sanitize_executor.sh: build $((built - start)) s, tests $((end - built)) s, exit $status"
exit $status
