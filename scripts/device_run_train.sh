#!/usr/bin/env bash
# One call on the nvidia-h200 device machine for the training runner (issue 10): build lcm,
# lcm-exec and every executor test binary; run the GPU tests; check that the benchmark
# families give the same records as before their split into setup / timing / check / print
# (issue 9; the old sources in .oldexec/, an export of the commit before the split, built
# alongside); run `lcm-exec train` on a tiny model, a Llama-3.1-8B slice and a Mixtral slice,
# hold the Llama slice against PyTorch (scripts/train_reference.py, fp32 and bf16, plus an
# eager PyTorch tokens/s benchmark) and every run against lcm's prediction (`lcm compare`).
# Leaves everything in $OUT (train_log.txt, ctest_gpu.log, bench_identity.txt, runs/...).
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_train.sh [build|tests|bench|train|megatron]...
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT/runs"
exec > >(tee -a "$OUT/train_log.txt") 2>&1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
section() { echo; echo "=== $* (t+$(( $(date +%s) - T0 ))s)"; }
want() { [ $# -eq 0 ] && return 0; for a in "${STEPS[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }
STEPS=("$@"); [ ${#STEPS[@]} -eq 0 ] && STEPS=(build tests bench train megatron)
EXE=$ROOT/build/bin/lcm-exec
LCM=$ROOT/build/bin/lcm
TORCH_CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])" 2>/dev/null)
[ -d "$TORCH_CUDNN_DIR/lib" ] && export LD_LIBRARY_PATH="$TORCH_CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}"

if want build; then
  section "build (lcm, lcm-exec, executor tests)"
  LCM_TARGETS="lcm lcm-exec lcm_executor_gpu_tests lcm_executor_host_tests lcm_executor_train_tests \
lcm_executor_train_gpu_tests lcm_executor_train_moe_gpu_tests lcm_train_runner_tests lcm_train_runner_gpu_tests" \
    bash scripts/device_run_heldout.sh build
  if [ -d .oldexec ]; then
    section "build the pre-split lcm-exec (.oldexec)"
    (cd .oldexec && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCM_BUILD_GUI=OFF -DLCM_BUILD_TESTS=OFF \
       -DLCM_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 ${TORCH_CUDNN_DIR:+-DCUDNN_ROOT=$TORCH_CUDNN_DIR} \
       > build-configure.log 2>&1 && ninja -C build -j 16 lcm-exec 2>&1 | tail -2)
  fi
fi

if want tests; then
  section "GPU tests (ctest -L gpu)"
  timeout 420 ctest --test-dir build -L gpu --output-on-failure 2>&1 | tee "$OUT/ctest_gpu.log" | tail -60
  section "host tests of the training runner"
  timeout 120 ctest --test-dir build -R "^(Train|CachingAllocator|IndexedDataset|SyntheticTokens|CopyTask|TokenSource|Checkpoint|BenchHelpers)" \
    2>&1 | tail -5
fi

if want bench && [ -x .oldexec/build/bin/lcm-exec ]; then
  section "bench records before/after the split (timing fields masked)"
  MPI="mpirun --allow-run-as-root --bind-to none -np 1"
  mask() {  # drop the fields that differ between runs
    python3 - "$1" <<'PY'
import json, re, sys
t = re.compile(r"time|_us$|_s$|tflops|gbps|algbw|busbw|clock|warmup|reps|start|steps|exposed|build_seconds|date|host|pid|elapsed|seconds|duration|ms$|bandwidth|throughput|rate|median|mean|min|max|p\d+|stddev|spread|samples|series")
def walk(x):
    if isinstance(x, dict): return {k: ("<t>" if t.search(k) else walk(v)) for k, v in x.items()}
    if isinstance(x, list): return [walk(v) for v in x]
    return x
d = json.load(open(sys.argv[1]))
print(json.dumps(walk(d), indent=1, sort_keys=True))
PY
  }
  run_both() {  # run_both NAME ARGS...
    local name=$1; shift
    for side in old new; do
      local bin=$EXE; [ $side = old ] && bin=$ROOT/.oldexec/build/bin/lcm-exec
      rm -rf "build/ident/$side/$name"; mkdir -p "build/ident/$side"
      timeout 150 $MPI "$bin" "$@" --out "build/ident/$side/$name" > "build/ident/$side/$name.stdout" 2>&1
      echo "exit $?" >> "build/ident/$side/$name.stdout"
      [ -f "build/ident/$side/$name/summary.json" ] && mask "build/ident/$side/$name/summary.json" > "build/ident/$side/$name.masked"
    done
    if diff -q "build/ident/old/$name.masked" "build/ident/new/$name.masked" > /dev/null 2>&1; then
      echo "$name: records identical (masked); exit codes: $(tail -1 build/ident/old/$name.stdout) / $(tail -1 build/ident/new/$name.stdout)"
    else
      echo "$name: DIFFER"; diff "build/ident/old/$name.masked" "build/ident/new/$name.masked" | head -20
    fi
  }
  {
    run_both membw bench membw -b 1M -e 64M
    run_both gemm bench gemm --shapes 4096x4096x4096,3000x5000x7000
    run_both attention bench attention --shapes 1x4096x32x8x128,1x2048x32x32x64
    run_both moe bench moe --capacity-factor none,1.0 --skew balanced,zipf:1.2
    run_both cp1 bench cp-attention --shapes 1x4096x32x8x128
    run_both membw_corrupt bench membw -b 1M -e 4M --inject corrupt@rank=0
    run_both moe_corrupt bench moe --capacity-factor 1.0 --inject corrupt@rank=0
  } 2>&1 | tee "$OUT/bench_identity.txt"
fi

if want train; then
  section "lcm-exec train"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  train() {  # train NAME SCENARIO ARGS...
    local name=$1 scen=$2; shift 2
    local dir=build/runs/$name; rm -rf "$dir"
    echo "--- $name: lcm-exec train $scen $*"
    /usr/bin/time -f "wall %e s, max RSS %M KB" timeout ${TRAIN_TIMEOUT:-200} "$EXE" train "$scen" "$@" --out "$dir" 2>&1 | tail -15
    echo "exit ${PIPESTATUS[0]}"
    mkdir -p "$OUT/runs/$name"
    cp "$dir/summary.json" "$OUT/runs/$name/" 2>/dev/null
    [ -f "$dir/trace.rank0.json" ] && gzip -c "$dir/trace.rank0.json" > "$OUT/runs/$name/trace.rank0.json.gz"
    if [ -f "$dir/summary.json" ]; then
      python3 -c "import json;d=json.load(open('$dir/summary.json'));print('step_time_s',d['step_time_s'],'tokens/s',d['tokens_per_s'],'mfu',d['mfu']);print('losses',[round(s['loss'],4) for s in d['steps']]);print('memory',d['memory'])"
      timeout 60 "$LCM" compare "$scen" "$dir" --format markdown -o "$OUT/runs/$name/compare.md" --trace-out "$OUT/runs/$name/compare_trace.json" \
        && sed -n 1,40p "$OUT/runs/$name/compare.md" || echo "lcm compare failed"
    fi
  }
  ONE=(--set hardware.num_gpus=1 --set parallel.tensor_model_parallel_size=1 --set parallel.sequence_parallel=false
       --set parallel.context_parallel_size=1 --set parallel.pipeline_model_parallel_size=1 --set parallel.tp_comm_overlap=false)
  NORC=(--set parallel.recompute_granularity=none --set parallel.recompute_num_layers=null)
  FULL=(--set parallel.recompute_granularity=full --set parallel.recompute_method=uniform --set parallel.recompute_num_layers=1)
  SEL=(--set parallel.recompute_granularity=selective --set parallel.recompute_num_layers=null)
  EP1=(--set parallel.expert_model_parallel_size=1)
  L8=(llama3.1-8b "${ONE[@]}")
  # Dense Llama-3.1-8B slices (2 layers, every per-GPU shape of the 1-GPU layout exact).
  train llama8b_s8k_none "${L8[@]}" "${NORC[@]}" --set training.seq_length=8192 --set training.global_batch_size=4 \
    --layers 2 --steps 8 --dump build/runs/llama8b_dump
  if [ -d build/runs/llama8b_dump ]; then
    section "PyTorch reference of the Llama slice (fp32 and bf16) and eager tokens/s"
    timeout 300 python3 scripts/train_reference.py build/runs/llama8b_dump --bench 2>&1 | tail -30 | tee "$OUT/runs/llama8b_reference.txt"
    rm -rf build/runs/llama8b_dump
  fi
  train llama8b_s8k_full "${L8[@]}" "${FULL[@]}" --set training.seq_length=8192 --set training.global_batch_size=4 --layers 2 --steps 6
  train llama8b_s8k_sel "${L8[@]}" "${SEL[@]}" --set training.seq_length=8192 --set training.global_batch_size=4 --layers 2 --steps 6
  train llama8b_s4k_none_mb8 "${L8[@]}" "${NORC[@]}" --set training.seq_length=4096 --set training.global_batch_size=8 --layers 2 --steps 6
  train llama8b_s32k_full "${L8[@]}" "${FULL[@]}" --set training.seq_length=32768 --set training.global_batch_size=2 --layers 2 --steps 5
  train llama70b_s8k_full llama3.1-70b "${ONE[@]}" "${FULL[@]}" --set training.seq_length=8192 --set training.global_batch_size=2 --layers 2 --steps 5
  # MoE slices: Mixtral (softmax top-2, 8 experts) dropless and with capacity factors, Qwen3-30B-A3B (128 experts, top-8).
  MX=(mixtral-8x7b "${ONE[@]}" "${EP1[@]}" "${NORC[@]}" --set training.seq_length=4096 --set training.global_batch_size=4)
  train mixtral_s4k_dropless "${MX[@]}" --layers 2 --steps 6
  train mixtral_s4k_cf1.0 "${MX[@]}" --set model.moe_expert_capacity_factor=1.0 --layers 2 --steps 6
  train mixtral_s4k_cf1.25 "${MX[@]}" --set model.moe_expert_capacity_factor=1.25 --layers 2 --steps 6
  train qwen3_30b_s4k qwen3-30b-a3b "${ONE[@]}" "${EP1[@]}" "${NORC[@]}" --set training.seq_length=4096 \
    --set training.global_batch_size=4 --layers 2 --steps 6
fi

# Megatron-LM (local transformer implementation, mock data) on the Llama slice, as the peer
# reference the issue names: its printed iteration time and memory. Megatron's sources are
# carried in .megatron/ (fetched, never committed).
if want megatron && [ -f .megatron/pretrain_gpt.py ]; then
  section "Megatron-LM peer: Llama-3.1-8B slice, 2 layers, seq 8192, gbs 4, mbs 1, bf16"
  (cd .megatron && CUDA_DEVICE_MAX_CONNECTIONS=1 timeout ${MEGATRON_TIMEOUT:-300} torchrun --nproc_per_node 1 pretrain_gpt.py \
    --transformer-impl local --mock-data --tokenizer-type NullTokenizer --vocab-size 128256 \
    --num-layers 2 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention \
    --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 4 \
    --bf16 --normalization RMSNorm --swiglu --disable-bias-linear --position-embedding-type rope --rotary-base 500000 \
    --untie-embeddings-and-output-weights --no-persist-layer-norm --attention-dropout 0 --hidden-dropout 0 --init-method-std 0.02 \
    --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --weight-decay 0.1 --clip-grad 1.0 --adam-beta2 0.95 \
    --train-iters 10 --log-interval 1 --eval-iters 0 --eval-interval 1000 --log-throughput \
    --no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-bias-swiglu-fusion --no-rope-fusion \
    --distributed-backend nccl 2>&1) | grep -E "iteration +[0-9]+/|memory \(MB\)|Error|error|Traceback" | head -40 \
    | tee "$OUT/runs/megatron_llama8b_l2_s8k.txt"
fi
tar czf "$OUT/runs.tar.gz" -C "$OUT" runs && rm -rf "$OUT/runs"
section done
