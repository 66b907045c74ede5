#!/usr/bin/env bash
# The training runner's validation suite on the nvidia-h200 device machine (issue 10): the
# single-GPU configurations of validation/measured/h200/train_suite/DECLARATION.md, each run
# with `lcm-exec train` and held against lcm's prediction (`lcm compare`); the PyTorch
# numerics check of the tiny models in tests/data/train_tiny/ (scripts/train_reference.py);
# the speed comparison with plain PyTorch (dense 8K, MoE 4K) and the Megatron-LM peer.
# Leaves everything under $OUT (suite_log.txt, runs/<name>/{summary.json,compare.json,compare.md},
# numerics.txt, speed.txt, megatron_*.txt).
# Usage (device machine, repository root):
#   OUT=/tmp/out bash scripts/device_run_train_suite.sh [build] [tests] [numerics] [suite NAME...] [speed] [megatron]
# `suite` alone runs every configuration; names after it pick some.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT/runs"
exec > >(tee -a "$OUT/suite_log.txt") 2>&1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
EXE=$ROOT/build/bin/lcm-exec
LCM=$ROOT/build/bin/lcm
TORCH_CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
[ -d "$TORCH_CUDNN_DIR/lib" ] && export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"

# Steps and the suite's names.
STEPS=(); NAMES=()
in_suite=0
for a in "$@"; do
  case $a in
    build|tests|numerics|speed|megatron) STEPS+=("$a"); in_suite=0 ;;
    suite) STEPS+=(suite); in_suite=1 ;;
    *) if [ $in_suite = 1 ]; then NAMES+=("$a"); else echo "unknown step $a"; exit 2; fi ;;
  esac
done
want() { for s in "${STEPS[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

ONE=(--set hardware.num_gpus=1 --set parallel.tensor_model_parallel_size=1 --set parallel.sequence_parallel=false
     --set parallel.context_parallel_size=1 --set parallel.pipeline_model_parallel_size=1 --set parallel.tp_comm_overlap=false
     --set parallel.expert_model_parallel_size=1)
NORC=(--set parallel.recompute_granularity=none --set parallel.recompute_num_layers=null)
FULL=(--set parallel.recompute_granularity=full --set parallel.recompute_method=uniform --set parallel.recompute_num_layers=1)
SEL=(--set parallel.recompute_granularity=selective --set parallel.recompute_num_layers=null)
L8=(llama3.1-8b "${ONE[@]}")
MX=(mixtral-8x7b "${ONE[@]}" "${NORC[@]}" --set training.seq_length=4096 --set training.global_batch_size=4)
QW=(qwen3-30b-a3b "${ONE[@]}" "${NORC[@]}" --set training.seq_length=4096 --set training.global_batch_size=4)
# DeepSeek-V3 slice: layer 0 dense, layer 1 MoE with 32 of the 256 experts (8 groups of 4, top-8
# from 4 groups, sigmoid with the expert bias, one shared expert), MLA with q-LoRA and the latent
# norms (qk_layernorm, as Megatron's DeepSeek-V3 recipes), no MTP, fp32 Adam moments and whole fp32 masters.
DS=(deepseek-v3 "${ONE[@]}" --set model.mtp_num_layers=0 --set model.qk_layernorm=true --set model.num_experts=32
    --set "model.moe_layer_freq=([0]*1+[1]*60)" --set model.moe_token_dispatcher_type=alltoall
    --set training.exp_avg_dtype=fp32 --set training.exp_avg_sq_dtype=fp32 --set training.store_param_remainders=false
    --set parallel.num_layers_in_first_pipeline_stage=null --set parallel.num_layers_in_last_pipeline_stage=null
    --set training.seq_length=4096 --set training.global_batch_size=4)

# name -> arguments (scenario first); every run is --layers 2.
declare -A RUN
RUN[llama8b_s8k_none]="${L8[*]} ${NORC[*]} --set training.seq_length=8192 --set training.global_batch_size=4 --steps 8"
RUN[llama8b_s8k_sel]="${L8[*]} ${SEL[*]} --set training.seq_length=8192 --set training.global_batch_size=4 --steps 6"
RUN[llama8b_s8k_full]="${L8[*]} ${FULL[*]} --set training.seq_length=8192 --set training.global_batch_size=4 --steps 6"
RUN[llama8b_s4k_none_mb8]="${L8[*]} ${NORC[*]} --set training.seq_length=4096 --set training.global_batch_size=8 --steps 6"
RUN[llama8b_s32k_full]="${L8[*]} ${FULL[*]} --set training.seq_length=32768 --set training.global_batch_size=2 --steps 5"
RUN[llama70b_s8k_full]="llama3.1-70b ${ONE[*]} ${FULL[*]} --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[mixtral_s4k_dropless]="${MX[*]} --steps 6"
RUN[mixtral_s4k_cf1.0]="${MX[*]} --set model.moe_expert_capacity_factor=1.0 --steps 6"
RUN[mixtral_s4k_cf1.25]="${MX[*]} --set model.moe_expert_capacity_factor=1.25 --steps 6"
RUN[qwen3_30b_s4k]="${QW[*]} --steps 6"
RUN[qwen3_30b_s4k_cf1.0]="${QW[*]} --set model.moe_expert_capacity_factor=1.0 --steps 6"
RUN[deepseek_s4k]="${DS[*]} ${NORC[*]} --steps 6"
RUN[deepseek_s4k_sel]="${DS[*]} ${SEL[*]} --set parallel.recompute_modules=[mla_up_proj,core_attn,layernorm] --steps 6"
RUN[llama8b_s128k_full]="${L8[*]} ${FULL[*]} --set training.seq_length=131072 --set training.global_batch_size=1 --steps 4"
# The second held-out set (validation/measured/h200/train_suite2/DECLARATION.md, session 10).
RUN[qwen3_30b_s8k_sel]="${QW[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn,layernorm] --set training.seq_length=8192 --set training.global_batch_size=2 --steps 6"
RUN[qwen3_30b_s4k_cf1.25_mb8]="${QW[*]} --set model.moe_expert_capacity_factor=1.25 --set training.global_batch_size=8 --steps 5"
RUN[mixtral_s8k_full]="${MX[*]} ${FULL[*]} --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[deepseek_s8k_sel]="${DS[*]} ${SEL[*]} --set parallel.recompute_modules=[mla_up_proj,core_attn,layernorm] --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[llama70b_s4k_sel]="llama3.1-70b ${ONE[*]} ${SEL[*]} --set training.seq_length=4096 --set training.global_batch_size=4 --steps 5"
RUN[llama8b_s64k_full]="${L8[*]} ${FULL[*]} --set training.seq_length=65536 --set training.global_batch_size=1 --steps 4"
# The third held-out set (validation/measured/h200/train_suite3/DECLARATION.md, session 10).
RUN[qwen3_30b_s2k_mb16]="${QW[*]} --set training.seq_length=2048 --set training.global_batch_size=16 --steps 5"
RUN[qwen3_30b_s16k_full]="${QW[*]} ${FULL[*]} --set training.seq_length=16384 --set training.global_batch_size=1 --steps 5"
RUN[mixtral_s2k_mb8]="${MX[*]} --set training.seq_length=2048 --set training.global_batch_size=8 --steps 5"
RUN[mixtral_s16k_full]="${MX[*]} ${FULL[*]} --set training.seq_length=16384 --set training.global_batch_size=1 --steps 5"
RUN[deepseek_s2k_mb8]="${DS[*]} ${NORC[*]} --set training.seq_length=2048 --set training.global_batch_size=8 --steps 5"
RUN[llama8b_s8k_mb1]="${L8[*]} ${NORC[*]} --set training.seq_length=8192 --set training.global_batch_size=1 --steps 8"
RUN[llama70b_s16k_full]="llama3.1-70b ${ONE[*]} ${FULL[*]} --set training.seq_length=16384 --set training.global_batch_size=1 --steps 4"
RUN[llama8b_s16k_sel_mb2]="${L8[*]} ${SEL[*]} --set training.seq_length=16384 --set training.global_batch_size=2 --steps 5"
# The fourth held-out set (validation/measured/h200/train_suite4/DECLARATION.md, session 11).
RUN[llama8b_s4k_full_mb4]="${L8[*]} ${FULL[*]} --set training.seq_length=4096 --set training.global_batch_size=4 --steps 6"
RUN[llama8b_s16k_none_mb1]="${L8[*]} ${NORC[*]} --set training.seq_length=16384 --set training.global_batch_size=1 --steps 6"
RUN[llama8b_s32k_sel_mb1]="${L8[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=32768 --set training.global_batch_size=1 --steps 5"
RUN[llama8b_s96k_full]="${L8[*]} ${FULL[*]} --set training.seq_length=98304 --set training.global_batch_size=1 --steps 4"
RUN[llama70b_s8k_sel_mb2]="llama3.1-70b ${ONE[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[mixtral_s4k_sel_mb4]="${MX[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --steps 5"
RUN[mixtral_s8k_cf1.0_mb2]="${MX[*]} --set model.moe_expert_capacity_factor=1.0 --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[mixtral_s2k_cf1.25_mb4]="${MX[*]} --set model.moe_expert_capacity_factor=1.25 --set training.seq_length=2048 --set training.global_batch_size=4 --steps 5"
RUN[qwen3_30b_s8k_none_mb2]="${QW[*]} --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[qwen3_30b_s2k_cf1.25_mb8]="${QW[*]} --set model.moe_expert_capacity_factor=1.25 --set training.seq_length=2048 --set training.global_batch_size=8 --steps 5"
RUN[deepseek_s4k_full_mb2]="${DS[*]} ${FULL[*]} --set training.global_batch_size=2 --steps 5"
RUN[deepseek_s8k_none_mb1]="${DS[*]} ${NORC[*]} --set training.seq_length=8192 --set training.global_batch_size=1 --steps 5"
# The fifth held-out set (validation/measured/h200/train_suite5/DECLARATION.md, session 11).
RUN[llama8b_s2k_none_mb16]="${L8[*]} ${NORC[*]} --set training.seq_length=2048 --set training.global_batch_size=16 --steps 5"
RUN[llama8b_s48k_sel_mb1]="${L8[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=49152 --set training.global_batch_size=1 --steps 4"
RUN[llama70b_s4k_full_mb4]="llama3.1-70b ${ONE[*]} ${FULL[*]} --set training.seq_length=4096 --set training.global_batch_size=4 --steps 5"
RUN[mixtral_s2k_dropless_mb2]="${MX[*]} --set training.seq_length=2048 --set training.global_batch_size=2 --steps 6"
RUN[mixtral_s32k_full]="${MX[*]} ${FULL[*]} --set training.seq_length=32768 --set training.global_batch_size=1 --steps 4"
RUN[qwen3_30b_s4k_sel_mb4]="${QW[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --steps 5"
RUN[qwen3_30b_s2k_cf1.0_mb4]="${QW[*]} --set model.moe_expert_capacity_factor=1.0 --set training.seq_length=2048 --set training.global_batch_size=4 --steps 6"
RUN[qwen3_30b_s32k_full]="${QW[*]} ${FULL[*]} --set training.seq_length=32768 --set training.global_batch_size=1 --steps 4"
RUN[deepseek_s2k_cf1.0_mb4]="${DS[*]} ${NORC[*]} --set model.moe_expert_capacity_factor=1.0 --set training.seq_length=2048 --set training.global_batch_size=4 --steps 5"
RUN[deepseek_s16k_full]="${DS[*]} ${FULL[*]} --set training.seq_length=16384 --set training.global_batch_size=1 --steps 4"
# The sixth held-out set (validation/measured/h200/train_suite6/DECLARATION.md, session 12).
RUN[llama8b_s4k_sel_mb2]="${L8[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=4096 --set training.global_batch_size=2 --steps 6"
RUN[llama8b_s24k_none_mb1]="${L8[*]} ${NORC[*]} --set training.seq_length=24576 --set training.global_batch_size=1 --steps 5"
RUN[llama8b_s12k_full_mb2]="${L8[*]} ${FULL[*]} --set training.seq_length=12288 --set training.global_batch_size=2 --steps 5"
RUN[llama70b_s2k_none_mb8]="llama3.1-70b ${ONE[*]} ${NORC[*]} --set training.seq_length=2048 --set training.global_batch_size=8 --steps 5"
RUN[mixtral_s8k_sel_mb2]="${MX[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
RUN[mixtral_s4k_cf1.25_full_mb2]="${MX[*]} ${FULL[*]} --set model.moe_expert_capacity_factor=1.25 --set training.global_batch_size=2 --steps 5"
RUN[qwen3_30b_s16k_sel_mb1]="${QW[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=16384 --set training.global_batch_size=1 --steps 5"
RUN[qwen3_30b_s4k_full_mb8]="${QW[*]} ${FULL[*]} --set training.global_batch_size=8 --steps 5"
RUN[deepseek_s4k_cf1.25_mb2]="${DS[*]} ${NORC[*]} --set model.moe_expert_capacity_factor=1.25 --set training.global_batch_size=2 --steps 5"
RUN[deepseek_s8k_full_mb2]="${DS[*]} ${FULL[*]} --set training.seq_length=8192 --set training.global_batch_size=2 --steps 5"
# The seventh held-out set (validation/measured/h200/train_suite7/DECLARATION.md, session 12).
RUN[qwen3_30b_s2k_mb2]="${QW[*]} --set training.seq_length=2048 --set training.global_batch_size=2 --steps 6"
RUN[qwen3_30b_s4k_cf1.25_mb2]="${QW[*]} --set model.moe_expert_capacity_factor=1.25 --set training.global_batch_size=2 --steps 6"
RUN[qwen3_30b_s8k_full_mb4]="${QW[*]} ${FULL[*]} --set training.seq_length=8192 --set training.global_batch_size=4 --steps 5"
RUN[mixtral_s2k_cf1.0_mb4]="${MX[*]} --set model.moe_expert_capacity_factor=1.0 --set training.seq_length=2048 --set training.global_batch_size=4 --steps 6"
RUN[mixtral_s4k_mb1]="${MX[*]} --set training.global_batch_size=1 --steps 8"
RUN[mixtral_s16k_sel_mb1]="${MX[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=16384 --set training.global_batch_size=1 --steps 5"
RUN[deepseek_s2k_mb2]="${DS[*]} ${NORC[*]} --set training.seq_length=2048 --set training.global_batch_size=2 --steps 6"
RUN[llama8b_s2k_none_mb4]="${L8[*]} ${NORC[*]} --set training.seq_length=2048 --set training.global_batch_size=4 --steps 6"
RUN[llama8b_s64k_sel_mb1]="${L8[*]} ${SEL[*]} --set parallel.recompute_modules=[core_attn] --set training.seq_length=65536 --set training.global_batch_size=1 --steps 4"
RUN[llama70b_s8k_none_mb1]="llama3.1-70b ${ONE[*]} ${NORC[*]} --set training.seq_length=8192 --set training.global_batch_size=1 --steps 5"
ORDER=(llama8b_s8k_none llama8b_s8k_sel llama8b_s8k_full llama8b_s4k_none_mb8 llama8b_s32k_full llama70b_s8k_full
       mixtral_s4k_dropless mixtral_s4k_cf1.0 mixtral_s4k_cf1.25 qwen3_30b_s4k qwen3_30b_s4k_cf1.0 deepseek_s4k
       deepseek_s4k_sel llama8b_s128k_full)

if want build; then
  section "build (lcm, lcm-exec, executor tests)"
  LCM_TARGETS="lcm lcm-exec lcm_executor_gpu_tests lcm_executor_host_tests lcm_executor_train_tests \
lcm_executor_train_gpu_tests lcm_executor_train_moe_gpu_tests lcm_train_runner_tests lcm_train_runner_gpu_tests" \
    bash scripts/device_run_heldout.sh build
fi

if want tests; then
  section "GPU tests (ctest -L gpu)"
  timeout 480 ctest --test-dir build -L gpu --output-on-failure 2>&1 | tee "$OUT/ctest_gpu.log" | tail -40
fi

if want numerics; then
  section "PyTorch numerics of the tiny models (fp32 and bf16)"
  mkdir -p build/dumps
  for y in tests/data/train_tiny/*.yaml; do
    n=$(basename "$y" .yaml)
    rm -rf "build/dumps/$n"
    echo "--- $n"
    timeout 120 "$EXE" train "$y" --steps 2 --dump "build/dumps/$n" > "build/dumps/$n.log" 2>&1 || { echo "lcm-exec failed"; tail -5 "build/dumps/$n.log"; continue; }
    timeout 300 python3 scripts/train_reference.py "build/dumps/$n" 2>&1 | tail -12
  done 2>&1 | tee "$OUT/numerics.txt"
fi

if want suite; then
  section "lcm-exec train: the suite"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  [ ${#NAMES[@]} -eq 0 ] && NAMES=("${ORDER[@]}")
  for name in "${NAMES[@]}"; do
    args=${RUN[$name]:-}
    [ -z "$args" ] && { echo "no run named $name"; continue; }
    read -r -a A <<< "$args"
    dir=build/runs/$name; rm -rf "$dir"
    echo "--- $name: lcm-exec train ${A[*]} --layers 2"
    /usr/bin/time -f "wall %e s, max RSS %M KB" timeout ${TRAIN_TIMEOUT:-240} "$EXE" train "${A[@]}" --layers 2 --out "$dir" 2>&1 | tail -6
    mkdir -p "$OUT/runs/$name"
    [ -f "$dir/summary.json" ] || { echo "no summary"; continue; }
    cp "$dir/summary.json" "$OUT/runs/$name/"
    [ -f "$dir/trace.rank0.json" ] && gzip -c "$dir/trace.rank0.json" > "$OUT/runs/$name/trace.rank0.json.gz"
    # COMPARE=0: a held-out set measured before the model that predicts it is frozen; its
    # prediction is made afterwards (lcm compare needs only summary.json), nothing is shown now.
    [ "${COMPARE:-1}" = 0 ] && continue
    timeout 60 "$LCM" compare "${A[0]}" "$dir" --format json -o "$OUT/runs/$name/compare.json"
    timeout 60 "$LCM" compare "${A[0]}" "$dir" --format markdown -o "$OUT/runs/$name/compare.md" && sed -n 3,8p "$OUT/runs/$name/compare.md"
  done
  [ "${COMPARE:-1}" = 0 ] || python3 scripts/train_suite_table.py "$OUT/runs" validation/measured/h200/train_suite/DECLARATION.md | tee "$OUT/suite_table.md"
fi

if want speed; then
  section "speed: lcm-exec train vs plain PyTorch eager (same GPU, same configuration)"
  for name in llama8b_s8k_none mixtral_s4k_dropless; do
    read -r -a A <<< "${RUN[$name]}"
    rm -rf build/dumps/speed; echo "--- $name"
    timeout 300 "$EXE" train "${A[@]}" --layers 2 --dump build/dumps/speed --out "build/runs/${name}_speed" 2>&1 | tail -2
    python3 -c "import json;d=json.load(open('build/runs/${name}_speed/summary.json'));print('lcm-exec train: %.0f tokens/s, MFU %.1f%%' % (d['tokens_per_s'], 100*d['mfu']))"
    timeout 400 python3 scripts/train_reference.py build/dumps/speed --bench-only --bench-steps 8 2>&1 | tail -3
    rm -rf build/dumps/speed
  done 2>&1 | tee "$OUT/speed.txt"
fi

# Megatron-LM (local transformer implementation, mock data) as the peer: the dense 8K slice and
# the Mixtral 4K slice. Megatron's sources are carried in .megatron/ (fetched, never committed).
if want megatron && [ -f .megatron/pretrain_gpt.py ]; then
  COMMON=(--transformer-impl local --mock-data --tokenizer-type NullTokenizer --micro-batch-size 1 --global-batch-size 4
          --bf16 --normalization RMSNorm --swiglu --disable-bias-linear --position-embedding-type rope
          --untie-embeddings-and-output-weights --no-persist-layer-norm --attention-dropout 0 --hidden-dropout 0
          --init-method-std 0.02 --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --weight-decay 0.1 --clip-grad 1.0
          --adam-beta2 0.95 --train-iters 10 --log-interval 1 --eval-iters 0 --eval-interval 1000 --log-throughput
          --no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-bias-swiglu-fusion --no-rope-fusion
          --distributed-backend nccl --num-layers 2 --group-query-attention --num-query-groups 8)
  mega() {  # mega NAME ARGS...
    local name=$1; shift
    section "Megatron-LM peer: $name"
    (cd .megatron && CUDA_DEVICE_MAX_CONNECTIONS=1 timeout ${MEGATRON_TIMEOUT:-240} torchrun --nproc_per_node 1 pretrain_gpt.py \
      "${COMMON[@]}" "$@" 2>&1) | grep -E "iteration +[0-9]+/|memory \(MB\)|Error|error|Traceback" | head -40 | tee "$OUT/megatron_$name.txt"
  }
  mega llama8b_l2_s8k --vocab-size 128256 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \
    --seq-length 8192 --max-position-embeddings 8192 --rotary-base 500000
  mega mixtral_l2_s4k --vocab-size 32000 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \
    --seq-length 4096 --max-position-embeddings 32768 --rotary-base 1000000 --num-experts 8 --moe-router-topk 2 \
    --moe-token-dispatcher-type alltoall --moe-aux-loss-coeff 0 --moe-router-load-balancing-type none
fi
tar czf "$OUT/${RUNS_TAR:-runs}.tar.gz" -C "$OUT" runs && rm -rf "$OUT/runs"
section done
