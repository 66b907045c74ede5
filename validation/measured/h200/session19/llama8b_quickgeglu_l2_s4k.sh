#!/usr/bin/env bash
# Megatron-LM pretrain_gpt.py job for scenario 'llama3.1-8b-128k' (scenarios/llama3.1-8b.yaml), written by `lcm export`.
# Layout: tp1 pp1 dp1 mbs1 sel
# Layout (lcm notation): tp1 cp1 pp1 dp1 mbs1 sel optim
# Cluster: 1 GPUs (h200-sxm), 1 node(s) of 1; data parallel 1.
#
# Run:  bash THIS_FILE                 (torchrun on this node; set NODE_RANK and MASTER_ADDR per node)
#       LAUNCHER=srun sbatch THIS_FILE (one torchrun per node through srun)
# Data: --mock-data unless DATA_PATH is set (a Megatron indexed dataset prefix).
# Import back: lcm import megatron THIS_FILE --gpus N --hw PROFILE
set -euo pipefail

MEGATRON_LM_DIR=${MEGATRON_LM_DIR:-$PWD}  # a Megatron-LM checkout
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
DATA_PATH=${DATA_PATH:-}
# One CUDA connection keeps TP/CP communication ahead of compute on Hopper.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}

# Llama-3.1-8B: architecture
MODEL_ARGS=(
    --num-layers 2
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length 4096
    --max-position-embeddings 4096
    --position-embedding-type rope
    --rotary-base 500000
    --use-rope-scaling
    --rope-scaling-factor 8  # Llama 3 scaling, original 8192
    --normalization RMSNorm
    --quick-geglu  # gated quick-GELU
    --disable-bias-linear
    --untie-embeddings-and-output-weights
    --hidden-dropout 0
    --attention-dropout 0
    --make-vocab-size-divisible-by 128
    --tokenizer-type NullTokenizer  # placeholder: set your tokenizer (and drop --vocab-size if it has one)
    --vocab-size 128256  # the scenario's vocabulary (NullTokenizer: ids 0..N-1)
)

# Batch and precision
TRAINING_ARGS=(
    --global-batch-size 4
    --bf16
    --attention-backend auto  # flash / cuDNN fused attention
)

# Parallel layout, recompute and overlap (plan::megatron_flags)
PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
    --context-parallel-size 1
    --micro-batch-size 1
    --use-distributed-optimizer
    --recompute-granularity selective
    --overlap-grad-reduce
    --overlap-param-gather
)

# Schedule, logging and load balancing: not part of lcm's estimate; set your recipe's
RUN_ARGS=(
    --train-iters ${TRAIN_ITERS:-100}
    --lr ${LR:-3e-4}
    --min-lr ${MIN_LR:-3e-5}
    --lr-decay-style cosine
    --lr-warmup-iters ${LR_WARMUP_ITERS:-10}
    --log-interval 1
    --eval-iters 0
)

DATA_ARGS=(--mock-data)
if [[ -n "$DATA_PATH" ]]; then DATA_ARGS=(--data-path "$DATA_PATH" --split 99,1,0); fi

# Flags of your own, appended last (Megatron's parser keeps the last value), e.g.
#   EXTRA_ARGS="--transformer-impl local" on a machine without Transformer Engine.
EXTRA=()
if [[ -n "${EXTRA_ARGS:-}" ]]; then read -r -a EXTRA <<< "$EXTRA_ARGS"; fi

if [[ "${LAUNCHER:-torchrun}" == srun ]]; then
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  srun --nodes "$NNODES" --ntasks-per-node 1 --gpus-per-node "$GPUS_PER_NODE" \
    torchrun --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE" --rdzv-backend c10d \
    --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "${SLURM_JOB_ID:-lcm}" \
    "$MEGATRON_LM_DIR/pretrain_gpt.py" "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${PARALLEL_ARGS[@]}" \
    "${RUN_ARGS[@]}" "${DATA_ARGS[@]}" "${EXTRA[@]}"
else
  torchrun --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "$GPUS_PER_NODE" \
    --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \
    "$MEGATRON_LM_DIR/pretrain_gpt.py" "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${PARALLEL_ARGS[@]}" \
    "${RUN_ARGS[@]}" "${DATA_ARGS[@]}" "${EXTRA[@]}"
fi
