# The small Megatron-LM model the device host measurements run (sourced by
# scripts/device_run_megatron_host.sh and scripts/device_run_moe_presync.sh): BASE, the dense
# model's arguments (hidden 256, 256 tokens per micro-batch, local transformer implementation,
# 8 micro-batches of 1 per iteration, MEGATRON_HOST_ITERS iterations, default 12), and
# `moe E K`, the MoE layer's (E experts, top-K, softmax router with the aux loss, alltoall
# dispatcher at EP 1).
# shellcheck shell=bash
BASE=(--hidden-size 256 --ffn-hidden-size 768 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --kv-channels 64 --seq-length 256 --max-position-embeddings 256
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear --qk-layernorm
  --untie-embeddings-and-output-weights --hidden-dropout 0 --attention-dropout 0
  --tokenizer-type NullTokenizer --vocab-size 1024 --micro-batch-size 1 --global-batch-size 8 --bf16
  --use-distributed-optimizer --train-iters ${MEGATRON_HOST_ITERS:-12} --lr 1e-4 --min-lr 1e-5 --lr-decay-style constant
  --log-interval 1 --eval-iters 0 --eval-interval 1000 --mock-data
  --transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion
  --no-masked-softmax-fusion --no-bias-swiglu-fusion --no-rope-fusion)
moe() {  # moe E K
  echo --num-experts "$1" --moe-router-topk "$2" --moe-ffn-hidden-size 128 --moe-token-dispatcher-type alltoall \
    --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3 --expert-model-parallel-size 1
}
