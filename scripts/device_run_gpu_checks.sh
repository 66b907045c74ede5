#!/usr/bin/env bash
# One call on the nvidia-h200 device machine: build lcm-exec and the executor tests, run every
# GPU test, run compute-sanitizer memcheck and racecheck on the GPU tests and on small lcm-exec
# runs of our own kernels (MoE permutation, CP ring merge), and, on the idle CPU cores meanwhile,
# a libFuzzer campaign of the fuzz targets built on the development machine (carried in
# .fuzzcarry/: bin/ stripped fuzzers, lib/ their Debian yaml-cpp 0.7 and fmt 9).
# Leaves in $OUT: gpu_checks_log.txt, ctest_gpu.log, sanitizer_log.txt, fuzz_logs.tar.gz.
# Usage (device machine, repository root): OUT=/tmp/out FUZZ_SECONDS=400 bash scripts/device_run_gpu_checks.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_checks_log.txt") 2>&1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }

section "configure + build (executor and its tests)"
LCM_TARGETS="lcm lcm-exec lcm_executor_gpu_tests lcm_executor_host_tests lcm_executor_train_tests \
lcm_executor_train_gpu_tests lcm_executor_train_moe_gpu_tests lcm_train_runner_tests lcm_train_runner_gpu_tests" \
  bash scripts/device_run_heldout.sh build

FZ=$ROOT/build/fuzz-campaign; rm -rf "$FZ"; mkdir -p "$FZ"
if [ -d .fuzzcarry/bin ]; then
  section "fuzz campaign on $(nproc) cores, ${FUZZ_SECONDS:-400} s (background)"
  # The fuzzers were built in /work/wt/fuzz and read bundled files from there.
  mkdir -p /work/wt && ln -sfn "$ROOT" /work/wt/fuzz
  export LD_LIBRARY_PATH=$ROOT/.fuzzcarry/lib:${LD_LIBRARY_PATH:-}
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  declare -A jobs=([scenario_fuzz]=3 [set_fuzz]=2 [profile_fuzz]=1 [megatron_argv_fuzz]=2 [megatron_yaml_fuzz]=2
                   [exec_json_fuzz]=1 [nccl_log_fuzz]=1)
  declare -A max_len=([scenario_fuzz]=8192 [set_fuzz]=1024 [profile_fuzz]=16384 [megatron_argv_fuzz]=8192
                      [megatron_yaml_fuzz]=8192 [exec_json_fuzz]=16384 [nccl_log_fuzz]=4096)
  fuzz_pids=()
  for t in "${!jobs[@]}"; do
    mkdir -p "$FZ/corpus/$t" "$FZ/art"
    (cd "$FZ" && "$ROOT/.fuzzcarry/bin/$t" -fork="${jobs[$t]}" -ignore_crashes=1 -max_total_time="${FUZZ_SECONDS:-400}" \
       -max_len="${max_len[$t]}" -timeout=5 -rss_limit_mb=2048 -dict="$ROOT/fuzz/dict/$t.dict" \
       -artifact_prefix="$FZ/art/$t-" "$FZ/corpus/$t" "$ROOT/fuzz/corpus/$t" > "$FZ/$t.log" 2>&1) &
    fuzz_pids+=($!)
  done
fi

section "GPU tests (ctest -L gpu)"
timeout 240 ctest --test-dir build -L gpu --output-on-failure 2>&1 | tee "$OUT/ctest_gpu.log" | tail -40

section "compute-sanitizer"
CS="timeout 100 compute-sanitizer --error-exitcode 9 --print-limit 20"
GT=build/bin/lcm_executor_gpu_tests
EXE="build/bin/lcm-exec"
{
  echo "--- memcheck: in-process GPU tests (GEMM, copy, attention reference, cuDNN attention)"
  $CS --tool memcheck $GT --gtest_filter='GemmOnGpu.Small*:GemmOnGpu.ShapesNotMultipleOf16:CopyOnGpu.*:AttentionRefOnGpu.*:CudnnAttentionOnGpu.MhaD64*:CudnnAttentionOnGpu.SequenceNotAMultipleOf64*'; echo "exit $?"
  echo "--- memcheck: lcm-exec bench moe (our permutation, top-k, SwiGLU and un-permutation kernels)"
  $CS --tool memcheck $EXE bench moe --layout ep=1 --tokens 512 --hidden 256 --ffn 512 --experts 8 --topk 2 \
      --capacity-factor none,1.0 --skew balanced,zipf:1.2 --check full --out build/cs-moe; echo "exit $?"
  echo "--- memcheck: lcm-exec bench moe, sigmoid group-limited"
  $CS --tool memcheck $EXE bench moe --layout ep=1 --tokens 256 --hidden 256 --ffn 256 --experts 32 --topk 4 \
      --score sigmoid --topk-groups 2 --groups 4 --capacity-factor 1.25 --check full --out build/cs-moe2; echo "exit $?"
  echo "--- racecheck: lcm-exec bench moe (shared-memory hazards in our kernels)"
  $CS --tool racecheck $EXE bench moe --layout ep=1 --tokens 256 --hidden 128 --ffn 128 --experts 8 --topk 2 \
      --capacity-factor none --check full --out build/cs-moe3; echo "exit $?"
  echo "--- racecheck: in-process attention reference and GEMM checks"
  $CS --tool racecheck $GT --gtest_filter='AttentionRefOnGpu.*:GemmOnGpu.SmallBf16*:CopyOnGpu.*'; echo "exit $?"
  echo "--- memcheck: lcm-exec bench cp-attention on one GPU (ring merge kernels)"
  $CS --tool memcheck $EXE bench cp-attention --layout cp=1 --shapes 1x2048x4x2x64 --out build/cs-cp; echo "exit $?"
  # lcm-exec train (the training runner: embedding, RMSNorm, RoPE, cuDNN attention, SwiGLU, MoE
  # routing / permutation / grouped GEMMs, cross-entropy, Adam, clipping, the caching
  # allocator) on tiny models, 2 steps each.
  ONE="--set hardware.num_gpus=1 --set parallel.tensor_model_parallel_size=1 --set parallel.sequence_parallel=false \
--set parallel.context_parallel_size=1 --set parallel.pipeline_model_parallel_size=1 --set parallel.tp_comm_overlap=false \
--set parallel.recompute_granularity=selective --set parallel.recompute_num_layers=null"
  TINY="--set model.hidden_size=256 --set model.num_attention_heads=4 --set model.num_query_groups=2 \
--set model.kv_channels=64 --set model.vocab_size=1024 --set training.seq_length=512 --set training.global_batch_size=2 \
--layers 2 --steps 2 --warmup 0"
  echo "--- memcheck: lcm-exec train, tiny dense GQA (llama3.1-8b shape family)"
  $CS --tool memcheck $EXE train llama3.1-8b $ONE $TINY --set model.ffn_hidden_size=512 --out build/cs-train-dense; echo "exit $?"
  echo "--- memcheck: lcm-exec train, tiny MoE (mixtral family: softmax top-2, 4 experts, capacity factor 1.25)"
  $CS --tool memcheck $EXE train mixtral-8x7b $ONE $TINY --set parallel.expert_model_parallel_size=1 --set parallel.recompute_modules=core_attn \
      --set model.num_experts=4 --set model.moe_ffn_hidden_size=256 --set model.ffn_hidden_size=256 \
      --set model.moe_expert_capacity_factor=1.25 --out build/cs-train-moe; echo "exit $?"
  echo "--- racecheck: lcm-exec train, tiny MoE (dropless)"
  $CS --tool racecheck $EXE train mixtral-8x7b $ONE $TINY --set parallel.expert_model_parallel_size=1 --set parallel.recompute_modules=core_attn \
      --set model.num_experts=4 --set model.moe_ffn_hidden_size=256 --set model.ffn_hidden_size=256 \
      --out build/cs-train-moe-rc; echo "exit $?"
  echo "--- the sigmoid group-limited bench moe run that segfaulted at exit under memcheck (session 4): plain, then memcheck"
  $EXE bench moe --layout ep=1 --tokens 256 --hidden 256 --ffn 256 --experts 32 --topk 4 --score sigmoid \
      --topk-groups 2 --groups 4 --capacity-factor 1.25 --check full --out build/cs-moe2-plain > build/cs-moe2-plain.txt 2>&1
  echo "exit $? (plain)"; tail -3 build/cs-moe2-plain.txt
  $CS --tool memcheck --show-backtrace yes $EXE bench moe --layout ep=1 --tokens 256 --hidden 256 --ffn 256 --experts 32 \
      --topk 4 --score sigmoid --topk-groups 2 --groups 4 --capacity-factor 1.25 --check full --out build/cs-moe2b 2>&1 | tail -25
  echo "exit ${PIPESTATUS[0]}"
} > "$OUT/sanitizer_log.txt" 2>&1
grep -E "^---|ERROR SUMMARY|^exit|LEAK SUMMARY" "$OUT/sanitizer_log.txt"

if [ -d .fuzzcarry/bin ]; then
  section "waiting for the fuzz campaign"
  wait "${fuzz_pids[@]}"  # not a bare wait: the log tee above is a child too
  for t in "$FZ"/*.log; do echo "$(basename "$t" .log): $(grep -E '^#[0-9]+' "$t" | tail -1)"; done
  ls "$FZ/art" | head -20
  tar czf "$OUT/fuzz_logs.tar.gz" -C "$FZ" $(cd "$FZ" && ls *.log) art
fi
section done
