#!/usr/bin/env bash
# Runs the launch scripts that `lcm export megatron` writes, unchanged, with Megatron-LM on the
# device machine (1 GPU, mock data): do Megatron-LM's argument parser and training loop take
# every flag lcm writes? Two slices: Llama-3.1-8B (dense GQA, selective recompute) and
# Mixtral-8x7B (MoE, 4 experts, alltoall dispatcher), 2 layers, sequence 4096, 3 iterations.
# Megatron-LM is carried in .megatron/ (fetched, never committed); there is no Transformer
# Engine on the machine, so the run adds, through the script's own EXTRA_ARGS hook, the flags
# of the local transformer implementation (the kernels it lacks: persistent layer norm,
# gradient-accumulation / softmax / SwiGLU / RoPE fusions).
# Needs build/bin/lcm. Leaves $OUT/export_runs.txt and the exported scripts in $OUT/export/.
# Usage (device machine, repository root): OUT=/tmp/out [EXPORT_JOBS="name ..."] bash scripts/device_run_export.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT/export"
LOG=$OUT/export_runs.txt
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
LCM=$ROOT/build/bin/lcm
[ -x "$LCM" ] || { echo "build/bin/lcm missing" | tee -a "$LOG"; exit 2; }
[ -f .megatron/pretrain_gpt.py ] || { echo ".megatron/ missing" | tee -a "$LOG"; exit 2; }

LOCAL="--transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion \
--no-masked-softmax-fusion --no-bias-swiglu-fusion --no-rope-fusion --eval-interval 1000"
SLICE=(--gpus 1 --set num_layers=2 --set seq_length=4096 --set global_batch_size=4)

run_job() {  # run_job NAME SCENARIO LAYOUT [--set ...]
  local name=$1 scen=$2 layout=$3; shift 3
  local job=$OUT/export/$name.sh
  {
    echo "=== $name: lcm export megatron $scen ${SLICE[*]} $* --layout \"$layout\""
    if ! "$LCM" export megatron "$scen" "${SLICE[@]}" "$@" --layout "$layout" -o "$job"; then
      echo "export failed"; return
    fi
    echo "--- lcm estimate of the same job (step time, peak allocated)"
    "$LCM" estimate "$scen" "${SLICE[@]}" "$@" --layout "$layout" 2>&1 | grep -iE "step time|allocated|peak" | head -6
    echo "--- Megatron-LM running the exported script"
    (cd .megatron && MEGATRON_LM_DIR=$ROOT/.megatron NNODES=1 GPUS_PER_NODE=1 TRAIN_ITERS=3 LR_WARMUP_ITERS=1 \
       MASTER_PORT=$((6000 + RANDOM % 1000)) EXTRA_ARGS="$LOCAL" timeout 240 bash "$job" 2>&1) \
      | grep -E "iteration +[0-9]+/|memory \(MB\)|Error|error:|Traceback|unrecognized|AssertionError" | head -30
    echo "exit ${PIPESTATUS[0]}"
  } 2>&1 | tee -a "$LOG"
}

# EXPORT_JOBS="name ...": run only those jobs (default: all).
want() { [ -z "${EXPORT_JOBS:-}" ] || [[ " $EXPORT_JOBS " == *" $1 "* ]]; }
want llama8b_l2_s4k && run_job llama8b_l2_s4k scenarios/llama3.1-8b.yaml "tp1 pp1 dp1 mbs1 sel"
want mixtral_e4_l2_s4k && run_job mixtral_e4_l2_s4k scenarios/mixtral-8x7b.yaml "tp1 pp1 ep1 dp1 mbs1 sel" --set num_experts=4
# Session 19: the MLP's function (model.activation): Nemotron-4's squared ReLU without a gate
# (--squared-relu) and GPT-OSS's gated quick-GELU (--quick-geglu, on a Llama slice), in BF16.
want nemotron4_l2_s4k && run_job nemotron4_l2_s4k scenarios/nemotron4-15b.yaml "tp1 cp1 pp1 dp1 mbs1 sel" \
  --set precision=bf16 --set tp_comm_overlap=false
want llama8b_quickgeglu_l2_s4k && run_job llama8b_quickgeglu_l2_s4k scenarios/llama3.1-8b.yaml "tp1 pp1 dp1 mbs1 sel" \
  --set model.activation=quick_gelu
