#!/usr/bin/env bash
# Host time of Megatron-LM's own transformer and MoE layers, per layer and pass, on the device
# machine (1 GPU): the input of the `host:` block's layer_overhead_us and moe_layer_overhead_us
# (docs/time-model.md, "Host-bound regime").
#
# Method: Megatron-LM's pretrain_gpt.py (carried in .megatron/, fetched, never committed; local
# transformer implementation, since the machine has no Transformer Engine; mock data) trains a
# model so small (hidden 256, 256 tokens per micro-batch) that every kernel finishes before the
# host enqueues the next one: the iteration time is the host's time. Two depths (2 and 10 layers)
# give the time per layer as a slope, free of the embedding, the loss, the optimizer's fixed part
# and the data loader. Variants:
#   dense            GQA attention with QK layernorm + SwiGLU MLP (Qwen3-like), RMSNorm, RoPE
#   dense, full recompute: one more forward per layer, so the slope difference is a forward pass
#   moe E8 k8 / E16 k8 / E8 k2: the same attention + an MoE layer (softmax top-k router with the
#                    aux loss, alltoall dispatcher at EP 1: its permute, device-to-host sync and
#                    unpermute). The local implementation runs the experts as SequentialMLP (one
#                    Python module call per expert), so E16 - E8 gives the per-expert Python to
#                    remove; the router and dispatcher code is the same as with Transformer Engine.
#   moe E8 k8 and E16 k8, full recompute (the per-expert Python of a forward pass)
# Each run: 8 micro-batches per iteration, 12 iterations; the median of iterations 5-12 is used.
# Writes $OUT/megatron_host/{runs.txt,summary.json}. Needs .megatron/ (pretrain_gpt.py).
# Usage (device machine, repository root): OUT=/tmp/out [MEGATRON_HOST_SET=2|3|4|5|6|7|8] bash scripts/device_run_megatron_host.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
D=$OUT/megatron_host
mkdir -p "$D"
LOG=$D/runs.txt
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export CUDA_DEVICE_MAX_CONNECTIONS=1
[ -f .megatron/pretrain_gpt.py ] || { echo ".megatron/ missing" | tee -a "$LOG"; exit 2; }
{ echo "== host"; lscpu | grep -E "Model name|^CPU\(s\)|MHz" ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c "import torch; print('torch', torch.__version__)"; cat .megatron/COMMIT 2>/dev/null || echo "Megatron-LM commit: not recorded (.megatron/COMMIT missing)"; } >> "$LOG" 2>&1

. "$ROOT/scripts/megatron_small_model.sh"
FULL=(--recompute-granularity full --recompute-method uniform --recompute-num-layers 1)

# Set 4: the model of the CI row gpt3_mcore_tp1_pp2 (GPT-3 style: LayerNorm, GeLU, biases, learned
# positions, tied embeddings, GPT-2 vocabulary size, 1024 tokens, micro-batch 4), without pipelining.
BASE4=(--hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024
  --position-embedding-type learned_absolute --hidden-dropout 0 --attention-dropout 0
  --tokenizer-type NullTokenizer --vocab-size 50257 --micro-batch-size 4 --global-batch-size 4 --bf16
  --train-iters ${MEGATRON_HOST_ITERS:-12} --lr 1e-4 --min-lr 1e-5 --lr-decay-style constant
  --log-interval 1 --eval-iters 0 --eval-interval 1000 --mock-data
  --transformer-impl local --no-persist-layer-norm --no-gradient-accumulation-fusion
  --no-masked-softmax-fusion --no-bias-gelu-fusion)

run() {  # run NAME LAYERS ARGS...
  local name=$1 layers=$2; shift 2
  local base=("${BASE[@]}")
  [ "${MEGATRON_HOST_SET:-1}" = 4 ] && base=("${BASE4[@]}")
  echo "=== $name layers=$layers $*" >> "$LOG"
  (cd .megatron && timeout 200 torchrun --nproc-per-node 1 --master-port $((6100 + RANDOM % 800)) pretrain_gpt.py \
      --num-layers "$layers" "${base[@]}" "$@" 2>&1) > "$D/$name.log"
  echo "exit $?" >> "$LOG"
  grep -oE "elapsed time per iteration \(ms\): [0-9.]+" "$D/$name.log" | awk '{print $NF}' | tr '\n' ' ' >> "$LOG"
  echo >> "$LOG"
  grep -E "Error|error:|Traceback" "$D/$name.log" | head -5 >> "$LOG"
}

# The dense model at 2 and 10 layers for each micro-batch count M (global batch = M,
# micro-batch 1): runs PREFIX_l2_mM and PREFIX_l10_mM.
grid() {  # grid PREFIX M...
  local prefix=$1 m; shift
  for m in "$@"; do
    run "${prefix}_l2_m$m" 2 --global-batch-size "$m"
    run "${prefix}_l10_m$m" 10 --global-batch-size "$m"
  done
}

if [ "${MEGATRON_HOST_SET:-1}" = 8 ]; then
  # Set 8 (session 21): set 7's logging options again, interleaved with the plain run in one
  # call (DECLARATION_set8.md): plain, --log-params-norm, --log-num-zeros-in-grad at 40 layers,
  # three rounds, then the three at 10 layers once. Run with MEGATRON_HOST_ITERS=20.
  P=(--timing-log-level 0 --global-batch-size 1)
  for r in 1 2 3; do
    run "i8_plain_l40_r$r" 40 "${P[@]}"
    run "i8_pnorm_l40_r$r" 40 "${P[@]}" --log-params-norm
    run "i8_zeros_l40_r$r" 40 "${P[@]}" --log-num-zeros-in-grad
  done
  run i8_plain_l10 10 "${P[@]}"
  run i8_pnorm_l10 10 "${P[@]}" --log-params-norm
  run i8_zeros_l10 10 "${P[@]}" --log-num-zeros-in-grad
elif [ "${MEGATRON_HOST_SET:-1}" = 7 ]; then
  # Set 7 (session 21): the host time per iteration, from Megatron's own timers
  # (DECLARATION_set7.md). One micro-batch per iteration. --timing-log-level 1 prints the
  # forward-backward and optimizer timers (each start and stop synchronises the device) every
  # iteration; the parameter tensors per run are counted from the gradient buckets' listing.
  # The logging options every Megatron CI row sets (--log-params-norm, --log-num-zeros-in-grad
  # and the TensorBoard writers) are measured against the plain run at two depths. Two calls
  # (MEGATRON_HOST_PART=a|b) to stay within the device's 10 minutes per command; run with
  # MEGATRON_HOST_ITERS=20.
  T=(--timing-log-level 1 --global-batch-size 1)
  P=(--timing-log-level 0 --global-batch-size 1)
  TB=(--tensorboard-dir "$D/tb" --log-timers-to-tensorboard --log-memory-to-tensorboard
    --log-validation-ppl-to-tensorboard)
  if [ "${MEGATRON_HOST_PART:-a}" = a ]; then
    run i7_dense_l2 2 "${T[@]}"
    run i7_dense_l10 10 "${T[@]}"
    run i7_dense_l40 40 "${T[@]}"
    # shellcheck disable=SC2046
    run i7_moe_e32_l10 10 $(moe 32 2) "${T[@]}"
    run i7_plain_l10 10 "${P[@]}"
    run i7_plain_l40 40 "${P[@]}"
  else
    run i7_pnorm_l10 10 "${P[@]}" --log-params-norm
    run i7_pnorm_l40 40 "${P[@]}" --log-params-norm
    run i7_zeros_l10 10 "${P[@]}" --log-num-zeros-in-grad
    run i7_zeros_l40 40 "${P[@]}" --log-num-zeros-in-grad
    run i7_logs_tb_l10 10 "${P[@]}" --log-params-norm --log-num-zeros-in-grad "${TB[@]}"
    rm -rf "$D/tb"
  fi
elif [ "${MEGATRON_HOST_SET:-1}" = 6 ]; then
  # Set 6 (session 20): CUDA graphs (DECLARATION_set6.md). Megatron's local implementation:
  # whole layers, attention only, the MoE router + preprocessing, and a full-iteration graph,
  # each next to the eager run of the same depth in the same call. Two calls (a, b) to stay
  # within the device's 10 minutes per command. Run with MEGATRON_HOST_ITERS=20.
  G=(--cuda-graph-impl local)
  if [ "${MEGATRON_HOST_PART:-a}" = a ]; then
    run g6_dense_l2 2
    run g6_dense_l10 10
    run g6_dense_layer_l2 2 "${G[@]}"
    run g6_dense_layer_l10 10 "${G[@]}"
    run g6_dense_attn_l10 10 "${G[@]}" --cuda-graph-modules attn
    run g6_dense_full_l10 10 --cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
  else
    # shellcheck disable=SC2046
    run g6_moe_l2 2 $(moe 8 2)
    # shellcheck disable=SC2046
    run g6_moe_l10 10 $(moe 8 2)
    # shellcheck disable=SC2046
    run g6_moe_router_l2 2 $(moe 8 2) "${G[@]}" --cuda-graph-modules moe_router moe_preprocess
    # shellcheck disable=SC2046
    run g6_moe_router_l10 10 $(moe 8 2) "${G[@]}" --cuda-graph-modules moe_router moe_preprocess
  fi
elif [ "${MEGATRON_HOST_SET:-1}" = 5 ]; then
  # Set 5 (session 19): the host time per iteration. The dense model at 2 and 10 layers with 1,
  # 4 and 16 micro-batches: t = a + c L + M (b + s L) separates a part per iteration (a), per
  # layer and iteration (c: the optimizer's per-tensor work), per micro-batch (b) and per layer
  # and micro-batch (s). Run with MEGATRON_HOST_ITERS=20.
  grid iter 1 4 16
elif [ "${MEGATRON_HOST_SET:-1}" = 4 ]; then
  # Set 4 (session 19): a held-out check of the host model on another architecture, the CI
  # GPT model at 12 layers with 1, 2 and 8 micro-batches of 4 sequences. Run with
  # MEGATRON_HOST_ITERS=20.
  for m in 1 2 8; do
    run "gptci_l12_m$m" 12 --global-batch-size $((4 * m))
  done
elif [ "${MEGATRON_HOST_SET:-1}" = 3 ]; then
  # Set 3 (session 19): the host time outside the layers. Dense model at 2 and 10 layers with 1,
  # 2 and 8 micro-batches per iteration (global batch = micro-batches, micro-batch 1): the
  # intercept of each micro-batch count after the layers' slope is removed splits into a part
  # per iteration (optimizer step, training loop, logging) and a part per micro-batch
  # (embedding, loss, the schedule's Python). Run with MEGATRON_HOST_ITERS=20.
  grid fixed 1 2 8
elif [ "${MEGATRON_HOST_SET:-1}" = 1 ]; then
  run dense_l2 2
  run dense_l10 10
  run dense_l10_full 10 "${FULL[@]}"
  # shellcheck disable=SC2046
  run moe_e8k8_l2 2 $(moe 8 8)
  # shellcheck disable=SC2046
  run moe_e8k8_l10 10 $(moe 8 8)
  # shellcheck disable=SC2046
  run moe_e16k8_l10 10 $(moe 16 8)
  # shellcheck disable=SC2046
  run moe_e8k2_l10 10 $(moe 8 2)
  # shellcheck disable=SC2046
  run moe_e8k8_l10_full 10 $(moe 8 8) "${FULL[@]}"
  # shellcheck disable=SC2046
  run moe_e16k8_l10_full 10 $(moe 16 8) "${FULL[@]}"
else
  # Set 2: kernel and synchronisation counts per layer (torch.profiler over iteration 10, in
  # Megatron's own --profile --use-pytorch-profiler), the same runs' iterations 5-8 repeating
  # set 1's timings; and top-k 2 at both depths (set 1 had it at 10 layers only).
  PROF=(--profile --use-pytorch-profiler --profile-step-start 10 --profile-step-end 11 --profile-ranks 0)
  run prof_dense_l2 2 "${PROF[@]}" --tensorboard-dir "$D/prof_dense_l2/tb"
  run prof_dense_l10 10 "${PROF[@]}" --tensorboard-dir "$D/prof_dense_l10/tb"
  # shellcheck disable=SC2046
  run prof_moe_e8k8_l2 2 $(moe 8 8) "${PROF[@]}" --tensorboard-dir "$D/prof_moe_e8k8_l2/tb"
  # shellcheck disable=SC2046
  run prof_moe_e8k8_l10 10 $(moe 8 8) "${PROF[@]}" --tensorboard-dir "$D/prof_moe_e8k8_l10/tb"
  # shellcheck disable=SC2046
  run moe_e8k2_l2 2 $(moe 8 2)
  # shellcheck disable=SC2046
  run moe_e8k2_l10 10 $(moe 8 2)
  # The host's speed next to a DGX H100's (Xeon Platinum 8480C): the host time of one torch
  # nn.Linear forward (bf16, 2048 -> 2048, 8192 tokens) while the GPU is busy, the benchmark of
  # NVIDIA/TransformerEngine issue 2053, which reports 13.48 us for it on a DGX H100.
  python3 - >> "$LOG" 2>&1 <<'PY'
import json, statistics, time, torch
lin = torch.nn.Linear(2048, 2048, bias=False, device="cuda", dtype=torch.bfloat16)
x = torch.randn(8192, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
def host_us(grad):
    with torch.set_grad_enabled(grad):
        for _ in range(50): lin(x)
        torch.cuda.synchronize()
        per = []
        for _ in range(20):
            torch.cuda._sleep(50_000_000)  # keep the GPU busy so only the host is timed
            t0 = time.perf_counter()
            for _ in range(100): y = lin(x)
            per.append((time.perf_counter() - t0) / 100 * 1e6)
            del y
            torch.cuda.synchronize()
    return statistics.median(per), min(per)
g = host_us(True); n = host_us(False)
print(json.dumps({"linear_fwd_host_us_autograd": g[0], "linear_fwd_host_us_autograd_min": g[1],
                  "linear_fwd_host_us_no_grad": n[0], "linear_fwd_host_us_no_grad_min": n[1],
                  "dgx_h100_reference_us": 13.48}))
PY
fi

python3 - "$D" <<'EOF' >> "$LOG" 2>&1
import json, re, statistics, sys, pathlib
d = pathlib.Path(sys.argv[1])
med = {}
for f in sorted(d.glob("*.log")):
    its = [float(x) for x in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", f.read_text())]
    if len(its) >= 8:
        # profiled runs: the profiler warms up in iteration 10 and records 11; timing: 5-8
        window = its[4:8] if f.stem.startswith("prof_") else its[4:]
        med[f.stem.replace("prof_", "")] = {"iterations_ms": its, "median_5_12_ms": statistics.median(window)}
        text = f.read_text()
        # Megatron's timers (--timing-log-level 1): "name ...: (min, max)" once per iteration
        timers = {}
        for name, v in re.findall(r"^\s+([a-z][a-z0-9-]+) \.+: \(([0-9.]+), [0-9.]+\)", text, re.M):
            timers.setdefault(name, []).append(float(v))
        timers = {k: v for k, v in timers.items() if len(v) == len(its)}
        if timers:
            med[f.stem]["timers_median_ms"] = {k: statistics.median(v[4:]) for k, v in timers.items()}
        # parameter tensors: the gradient buckets' listing, one line per tensor
        med[f.stem.replace("prof_", "")]["param_tensors"] = len(re.findall(r"^\tmodule\.", text, re.M))
import gzip
counts = {}
for t in sorted(d.glob("prof_*/torch_profile/rank-0.json.gz")):
    ev = json.load(gzip.open(t))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    c = {"gpu_kernels": 0, "launch_calls": 0, "syncs": 0, "memcpy_dtoh": 0, "cpu_ops": 0}
    for e in ev:
        cat, name = e.get("cat", ""), e.get("name", "")
        if cat == "kernel": c["gpu_kernels"] += 1
        elif cat == "cuda_runtime" or cat == "cuda_driver":
            if "LaunchKernel" in name: c["launch_calls"] += 1
            if "Synchronize" in name: c["syncs"] += 1
        elif cat == "gpu_memcpy" and "DtoH" in name: c["memcpy_dtoh"] += 1
        elif cat == "cpu_op": c["cpu_ops"] += 1
    counts[t.parent.parent.name.replace("prof_", "")] = c
out_counts = {}
for kind in ("dense", "moe_e8k8"):
    a, b = counts.get(kind + "_l2"), counts.get(kind + "_l10")
    if a and b:  # one profiled iteration of 8 micro-batches: per layer and micro-batch
        out_counts[kind] = {k: (b[k] - a[k]) / 8 / 8 for k in a}
out = {"runs": med, "micro_batches_per_iteration": 8, "profile_counts": counts, "per_layer_counts": out_counts}
def slope(a, b):  # ms per layer per micro-batch between a 2- and a 10-layer run
    return (med[b]["median_5_12_ms"] - med[a]["median_5_12_ms"]) / 8 / 8
if "moe_e8k2_l2" in med:
    out["moe_layer_e8k2_fwd_bwd_us"] = 1e3 * slope("moe_e8k2_l2", "moe_e8k2_l10")
try:
    out["dense_layer_fwd_bwd_us"] = 1e3 * slope("dense_l2", "dense_l10")
    out["moe_layer_e8_fwd_bwd_us"] = 1e3 * slope("moe_e8k8_l2", "moe_e8k8_l10")
    out["per_local_expert_fwd_bwd_us"] = 1e3 * (med["moe_e16k8_l10"]["median_5_12_ms"] - med["moe_e8k8_l10"]["median_5_12_ms"]) / 8 / 10 / 8
    out["dense_fwd_pass_us"] = 1e3 * (med["dense_l10_full"]["median_5_12_ms"] - med["dense_l10"]["median_5_12_ms"]) / 8 / 10
    out["moe_e8_fwd_pass_us"] = 1e3 * (med["moe_e8k8_l10_full"]["median_5_12_ms"] - med["moe_e8k8_l10"]["median_5_12_ms"]) / 8 / 10
    out["moe_e16_fwd_pass_us"] = 1e3 * (med["moe_e16k8_l10_full"]["median_5_12_ms"] - med["moe_e16k8_l10"]["median_5_12_ms"]) / 8 / 10
except KeyError as e:
    out["missing"] = str(e)
print(json.dumps(out, indent=1))
(d / "summary.json").write_text(json.dumps(out, indent=1))
EOF
tar -C "$D" -czf "$D/logs.tar.gz" $(cd "$D" && ls -d ./*.log ./prof_* 2>/dev/null) && rm -rf "$D"/*.log "$D"/prof_*
cat "$LOG"
