#!/usr/bin/env bash
# Where the MoE layer's Python falls around the token dispatcher's synchronisation (session 35):
# scripts/megatron_moe_presync.py in place of pretrain_gpt.py, on the small MoE model of
# scripts/device_run_megatron_host.sh's set 1 (hidden 256, 256 tokens per micro-batch, local
# transformer implementation, alltoall dispatcher at EP 1), 4 layers, 8 micro-batches per
# iteration, for E8 top-8, E8 top-2 and E16 top-8. Writes $OUT/moe_presync/{NAME.json,NAME.log}.
# Needs .megatron/ (Megatron-LM, fetched, never committed; scripts/pack_megatron.sh packs it to carry).
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_moe_presync.sh
# Ran in session 36 on an H100 machine: validation/measured/h100/moe_presync/.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
D=${OUT:-$ROOT/device-out}/moe_presync
mkdir -p "$D"
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export CUDA_DEVICE_MAX_CONNECTIONS=1
# A packed copy (scripts/pack_megatron.sh) is unpacked in place.
[ -f .megatron/pretrain_gpt.py ] || [ ! -f .megatron/src.tar.xz ] || tar -C .megatron -xJf .megatron/src.tar.xz
[ -f .megatron/pretrain_gpt.py ] || { echo ".megatron/ missing (scripts/pack_megatron.sh)"; exit 2; }
MEGATRON_HOST_ITERS=16 . "$ROOT/scripts/megatron_small_model.sh"
run() {  # run NAME EXPERTS TOPK
  (cd .megatron && MOE_PRESYNC_OUT="$D/$1.json" timeout 240 torchrun --nproc-per-node 1 \
      --master-port $((6100 + RANDOM % 800)) ../scripts/megatron_moe_presync.py --num-layers 4 "${BASE[@]}" \
      $(moe "$2" "$3") > "$D/$1.log" 2>&1)
  echo "$1 exit $?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: round(v) for k, v in d['median_us'].items()})" "$D/$1.json" 2>&1)"
}
{ cat .megatron/COMMIT; lscpu | grep "Model name"; nvidia-smi --query-gpu=name --format=csv,noheader; } > "$D/host.txt" 2>&1
# RUNS (default: all three) picks among them, e.g. RUNS="e8_k8 e8_k2".
for r in ${RUNS:-e8_k8 e8_k2 e16_k8}; do
  case $r in
    e8_k8) run e8_k8 8 8 ;;
    e8_k2) run e8_k2 8 2 ;;
    e16_k8) run e16_k8 16 8 ;;
  esac
done
