#!/usr/bin/env bash
# One call on the nvidia-h200 device machine: build lcm-exec and measure the held-out set that
# validation/measured/h200/SET/DECLARATION.md declares (SET = heldout, the default, or heldout2
# .. heldout21; not a calibration input before its one held-out score), or the MoE development
# re-measures (SET moe_dev, moe19_dev).
# Leaves in $OUT: heldout_log.txt and one summary JSON per benchmark.
# Usage (device machine, repository root): OUT=/tmp/out bash scripts/device_run_heldout.sh [build|heldout|heldout2|...|heldout21|moe_dev|moe19_dev]
set -uo pipefail
. "$(dirname "$0")/device_single_gpu.sh"
device_setup heldout_log.txt heldout-results
device_build

[ "${1:-heldout}" = build ] && exit 0

# One benchmark run each; the summary lands in $OUT under the set's file name.
gemms() {  # gemms DTYPE SHAPES
  section "GEMM $1"
  timeout 200 $MPI "$EXE" bench gemm --dtype "$1" --out "$RES/gemm_$1" --shapes "$2"
  cp "$RES/gemm_$1/summary.json" "$OUT/gemm_$1.json"
}
copies() {  # copies FROM TO
  section "membw $1..$2"
  timeout 120 $MPI "$EXE" bench membw -b "$1" -e "$2" -f 2 --out "$RES/membw"
  cp "$RES/membw/summary.json" "$OUT/membw_small.json"
}
attention() {  # attention SHAPES
  section "attention"
  timeout 240 $MPI "$EXE" bench attention --point-ms 500 --out "$RES/attn" --shapes "$1"
  cp "$RES/attn/summary.json" "$OUT/attention.json"
}
attention_window() {  # attention_window WINDOW SHAPES: causal sliding-window attention
  section "attention, window $1"
  timeout 240 $MPI "$EXE" bench attention --point-ms 500 --window "$1" --out "$RES/attn_w$1" --shapes "$2"
  cp "$RES/attn_w$1/summary.json" "$OUT/attention_w$1.json"
}
kernels() {  # kernels BF16_SHAPES FP8_SHAPES COPY_FROM COPY_TO ATTENTION_SHAPES: a set's single-kernel runs
  gemms bf16 "$1"
  gemms fp8 "$2"
  copies "$3" "$4"
  attention "$5"
}
archive() {  # archive SET: one file of every summary and the log (the device tool returns a few files per call)
  (cd "$OUT" && tar czf "$1_results.tgz" ./*.json heldout_log.txt)
}
moe() {  # moe OUT_FILE TOKENS HIDDEN FFN EXPERTS TOPK SKEWS: one GPU (ep 1), dropless
  section "MoE $1"
  timeout 150 $MPI "$EXE" bench moe --layout ep=1 --tokens "$2" --hidden "$3" --ffn "$4" --experts "$5" --topk "$6" \
    --capacity-factor none --skew "$7" --out "$RES/$1"
  cp "$RES/$1/summary.json" "$OUT/$1.json"
}

# heldout18's attention probe shapes (dD/hqQ/hkvK/causal|full/sS[/bB]; batch 32768 tokens unless named).
FLASH2_SHAPES_18=d128/hq64/hkv8/causal/s8192,d128/hq16/hkv2/causal/s4096,d128/hq48/hkv8/causal/s4096,\
d128/hq24/hkv24/causal/s2048,d128/hq12/hkv12/causal/s2048,d128/hq32/hkv8/causal/s65536/b1,\
d128/hq32/hkv8/causal/s49152/b1,d128/hq32/hkv32/causal/s12288/b2,d128/hq32/hkv32/causal/s3072/b10,\
d128/hq32/hkv32/full/s6144/b5,d128/hq40/hkv8/full/s24576/b1,d192/hq12/hkv1/causal/s4096,d192/hq24/hkv2/causal/s4096,\
d192/hq32/hkv8/causal/s16384,d192/hq32/hkv32/full/s8192,d256/hq16/hkv16/causal/s8192,d256/hq16/hkv8/full/s4096,\
d64/hq32/hkv8/causal/s12288/b2,d64/hq64/hkv8/causal/s4096,d96/hq32/hkv32/causal/s8192

# heldout19's five MoE layers (SUFFIX on the file names): its held-out set and moe19_dev.
moe_layers_19() {  # moe_layers_19 SUFFIX
  moe "moe_dsv2_t18k_ep1$1" 18432 5120 1536 160 6 balanced,zipf:1.0
  moe "moe_dsv3_t15k_ep1$1" 15360 7168 2048 256 8 balanced,zipf:0.8
  moe "moe_gptoss_t31k_ep1$1" 31744 2880 2880 128 4 balanced,zipf:1.1
  moe "moe_mixtral_t9k_ep1$1" 9216 4096 14336 8 2 balanced,zipf:1.1
  moe "moe_qwen3_30b_t42k_ep1$1" 43008 2048 768 128 8 balanced,zipf:0.7
}

case ${1:-heldout} in
heldout21)
  kernels 4352x40x49152,2304x96x61440,6144x32x32768,6912x48x30720,3840x120x40960,1024x72x98304,\
192x6656x5632,232x7168x4608,96x11264x4608,280x5632x7168,23552x256x7168,36864x64x2048,416x7168x6144,360x6144x7168,\
1664x1280x1536,1024x2304x2048,5632x5632x3584,3328x12288x2560,15360x6144x1152 \
    1792x5632x5120,3584x7168x3072,8192x6144x2816,4608x7168x2560 60K 30M \
    1x132Kx32x8x128,2x30Kx32x8x128,1x156Kx32x8x128,1x220Kx16x8x128,1x76Kx48x8x64,3x17Kx40x8x128
  attention_window 128 1x69632x64x8x64
  attention_window 2048 1x55296x32x8x128
  moe moe_dsv2_t24064_ep1 24064 5120 1536 160 6 balanced,zipf:1.0
  moe moe_dsv3_t18944_ep1 18944 7168 2048 256 8 balanced,zipf:0.8
  moe moe_gptoss_t28160_ep1 28160 2880 2880 128 4 balanced,zipf:1.2
  moe moe_mixtral_t12800_ep1 12800 4096 14336 8 2 balanced,zipf:1.0
  moe moe_qwen3_30b_t35840_ep1 35840 2048 768 128 8 balanced,zipf:0.9
  archive heldout21
  ;;
heldout20)
  kernels 4864x48x40960,2560x88x57344,5632x24x34816,7424x56x28672,3584x112x45056,1280x64x90112,\
176x7168x5120,264x6144x4608,104x10752x4096,312x5120x6656,30720x160x4096,14336x120x5120,448x7168x5632,392x6656x6144,\
1408x1536x1664,1152x2560x1792,6144x6144x3328,3584x11776x2304,16384x5120x1280 \
    1536x6144x5120,3840x6656x2816,9216x5632x3072,4096x7680x2816 58K 29M \
    1x124Kx32x8x128,2x18Kx32x8x128,1x164Kx32x8x128,1x228Kx16x8x128,1x56Kx48x8x64,3x13Kx40x8x128
  attention_window 128 1x65536x64x8x64
  attention_window 4096 1x51200x32x8x128
  moe moe_dsv2_t26k_ep1 26624 5120 1536 160 6 balanced,zipf:0.7
  moe moe_dsv3_t17k_ep1 17408 7168 2048 256 8 balanced,zipf:1.0
  moe moe_gptoss_t29k_ep1 29696 2880 2880 128 4 balanced,zipf:0.8
  moe moe_mixtral_t19k_ep1 19456 4096 14336 8 2 balanced,zipf:0.9
  moe moe_qwen3_30b_t46k_ep1 47104 2048 768 128 8 balanced,zipf:1.1
  archive heldout20
  ;;
moe19_dev)
  # Development re-measure (session 42): heldout19's five MoE layers again, after the router's
  # and shared experts' GEMMs took cuBLASLt's algorithm for their exact shape (c502f61); the
  # committed h100/heldout19 summaries are the bucketed-algorithm runs of the same layers.
  moe_layers_19 _s42
  archive moe19_dev
  ;;
heldout19)
  kernels 4608x40x45056,2816x72x53248,5120x16x36864,6656x64x26624,3072x104x61440,1536x56x77824,\
160x6656x5120,248x7168x4096,80x11264x5120,296x5632x6144,26624x112x4096,12288x176x5120,432x6656x5632,368x7168x6144,\
1536x1280x1664,1280x2816x1536,5632x6656x3072,3328x12800x2304,15872x5632x1152 \
    1408x5632x5632,3328x6656x3072,8704x5120x3328,4608x8192x2560 54K 27M \
    1x108Kx32x8x128,2x22Kx32x8x128,1x172Kx32x8x128,1x244Kx16x8x128,1x64Kx48x8x64,3x11Kx40x8x128
  attention_window 128 1x61440x64x8x64
  attention_window 1024 1x47104x32x8x128
  moe_layers_19 ""
  archive heldout19
  ;;
heldout18)
  kernels 4352x56x36864,2304x104x49152,6144x24x28672,8704x80x20480,3328x48x57344,1792x88x69632,\
152x7168x5632,232x6656x4096,72x12288x4608,264x5120x6656,28672x96x4096,10240x144x6144,416x7168x5120,344x6144x6656,\
1664x1408x1792,1152x3072x1408,6144x7168x2816,3072x13312x2560,14336x6144x1152 \
    1280x5120x6144,3072x7168x3328,8192x6144x3072,5120x7680x2304 62K 31M \
    1x116Kx32x8x128,2x26Kx32x8x128,1x180Kx32x8x128,1x236Kx16x8x128,1x68Kx48x8x64,4x7Kx40x8x128
  attention_window 128 1x53248x64x8x64
  attention_window 2048 1x38912x32x8x128
  moe moe_dsv2_t22k_ep1 22528 5120 1536 160 6 balanced,zipf:0.9
  moe moe_dsv3_t20k_ep1 20480 7168 2048 256 8 balanced,zipf:1.1
  moe moe_gptoss_t34k_ep1 34816 2880 2880 128 4 balanced,zipf:0.9
  moe moe_mixtral_t13k_ep1 13312 4096 14336 8 2 balanced,zipf:0.9
  moe moe_qwen3_30b_t38k_ep1 38912 2048 768 128 8 balanced,zipf:0.8
  # FlashAttention-2 (torch SDPA's flash backend) and cuDNN through torch on the same shapes:
  # the held-out judge of the flash2 terms (the declaration's part 7).
  section "attention probe (torch SDPA: flash, cudnn)"
  timeout 400 python3 scripts/probe_kernels.py --only attention --attention-backends flash,cudnn \
    --attention-shapes "$FLASH2_SHAPES_18" --out "$OUT/attention_probe.json" | tail -3
  ;;
heldout17)
  kernels 3840x64x40960,2048x112x53248,5632x32x30720,7680x72x24576,2816x40x61440,1280x80x86016,\
136x6656x5120,200x8192x3584,88x10752x4096,240x5632x6144,24576x64x6144,12288x128x3584,384x6656x5120,312x7168x4608,\
1792x1280x2048,1408x2816x1152,5632x7680x3072,3584x12288x2304,13312x5632x1280 \
    1536x4608x5632,3584x6656x2816,7680x5632x3584,4608x7168x2048 50K 25M \
    1x100Kx32x8x128,2x20Kx32x8x128,1x184Kx32x8x128,1x248Kx16x8x128,1x60Kx48x8x64,4x6Kx40x8x128
  attention_window 128 1x45056x64x8x64
  attention_window 1024 1x34816x32x8x128
  moe moe_dsv2_t16k_ep1 16384 5120 1536 160 6 balanced,zipf:1.1
  moe moe_dsv3_t18k_ep1 18432 7168 2048 256 8 balanced,zipf:0.9
  moe moe_gptoss_t26k_ep1 26624 2880 2880 128 4 balanced,zipf:1.0
  moe moe_mixtral_t15k_ep1 15360 4096 14336 8 2 balanced,zipf:0.7
  moe moe_qwen3_30b_t44k_ep1 45056 2048 768 128 8 balanced,zipf:0.9
  ;;
heldout16)
  kernels 4096x48x45056,3072x96x28672,1536x16x65536,6656x176x14336,2560x24x73728,7168x56x36864,\
168x7168x4096,120x5120x6144,216x6144x3072,56x14336x5120,16384x96x5120,28672x40x4096,352x5120x6144,448x4096x7168,\
1600x1600x1600,2304x1536x1792,6656x8704x3584,4608x10752x2560,15360x4352x1024 \
    1024x5120x4096,2816x7168x3072,9728x6144x2048,5120x5120x2560 46K 23M \
    1x84Kx32x8x128,2x14Kx32x8x128,1x136Kx32x8x128,1x232Kx16x8x128,1x52Kx48x8x64,3x9Kx40x8x128
  attention_window 128 1x49152x64x8x64
  attention_window 2048 1x30720x32x8x128
  moe moe_dsv2_t20k_ep1 20480 5120 1536 160 6 balanced,zipf:0.8
  moe moe_dsv3_t14k_ep1 14336 7168 2048 256 8 balanced,zipf:1.2
  moe moe_gptoss_t30k_ep1 30720 2880 2880 128 4 balanced,zipf:0.8
  moe moe_mixtral_t11k_ep1 11264 4096 14336 8 2 balanced,zipf:1.0
  moe moe_qwen3_30b_t36k_ep1 36864 2048 768 128 8 balanced,zipf:0.6
  ;;
heldout15)
  kernels 2048x32x57344,6144x120x24576,1024x24x81920,5632x192x12288,3072x8x53248,8192x40x32768,\
184x5120x5120,104x8192x4096,200x7168x3584,48x10240x6144,14336x144x4096,24576x24x5120,1472x1472x1472,2560x1280x1920,\
7168x9216x3072,3840x11264x2048,16896x3840x896 \
    896x6144x4096,3328x8192x2560,11264x5120x2560,6144x6144x1536 56K 28M \
    1x76Kx32x8x128,3x12Kx32x8x128,1x148Kx32x8x128,1x200Kx24x8x128,1x44Kx48x8x64,2x7Kx40x8x128
  attention_window 128 1x57344x64x8x64
  attention_window 4096 1x43008x32x8x128
  moe moe_dsv2_t24064_ep1 24576 5120 1536 160 6 balanced,zipf:1.0
  moe moe_dsv3_t10k_ep1 10240 7168 2048 256 8 balanced,zipf:0.6
  moe moe_gptoss_t22k_ep1 22528 2880 2880 128 4 balanced,zipf:1.2
  moe moe_mixtral_t18k_ep1 18432 4096 14336 8 2 balanced,zipf:0.8
  moe moe_qwen3_30b_t48k_ep1 49152 2048 768 128 8 balanced,zipf:1.0
  ;;
heldout14)
  kernels 3584x64x32768,5120x160x20480,1536x32x49152,7168x96x16384,4096x16x40960,2560x48x65536,\
168x6144x4096,88x7168x5120,240x4096x7168,56x12288x4096,12288x160x5120,20480x32x7168,1344x1344x1344,2240x1120x2240,\
6144x10240x4096,4352x8192x2560,14848x4608x1024 \
    768x5120x4096,2816x9216x2048,13312x4096x3072,5376x5376x1792 68K 34M \
    1x60Kx40x8x128,2x20Kx40x8x128,1x104Kx24x8x128,1x240Kx16x8x128,1x36Kx64x8x64,4x5Kx32x8x128
  attention_window 128 1x40960x64x8x64
  attention_window 2048 1x26624x32x8x128
  moe moe_qwen3_235b_t20k_ep1 20480 4096 1536 128 8 balanced,zipf:0.8
  moe moe_dsv3_t12k_ep1 12288 7168 2048 256 8 balanced,zipf:1.0
  moe moe_gptoss_t36k_ep1 36864 2880 2880 128 4 balanced,zipf:0.6
  moe moe_mixtral22b_t16k_ep1 16384 6144 16384 8 2 balanced,zipf:1.2
  moe moe_olmoe_t40k_ep1 40960 2048 1024 64 8 balanced,zipf:1.0
  ;;
heldout13)
  kernels 152x6144x4096,72x8192x5120,216x5120x7168,32x14336x4096,10240x72x4096,22528x16x6144,6144x112x5120,\
26624x8x4096,1216x1216x1216,1920x960x3840,2688x2688x1344,5632x12288x4096,3328x9216x2048,13312x5120x1536,11264x4096x704 \
    640x6144x4096,2304x11264x2048,15360x3584x3072,4864x4864x1536 76K 19M \
    1x44Kx32x8x128,2x18Kx24x8x128,1x128Kx40x8x128,1x216Kx16x8x128,1x30Kx48x8x64,3x6Kx32x8x128
  attention_window 128 1x24576x64x8x64
  attention_window 1024 1x36864x32x8x128
  attention_window 4096 1x53248x32x8x128
  moe moe_qwen3_30b_t24k_ep1 24576 2048 768 128 8 balanced,zipf:0.6
  moe moe_gptoss_t28160_ep1 28672 2880 2880 128 4 balanced,zipf:1.0
  moe moe_dsv2lite_t28k_ep1 28672 2048 1408 64 6 balanced,zipf:1.2
  moe moe_mixtral_t24k_ep1 24576 4096 14336 8 2 balanced,zipf:0.6
  ;;
heldout12)
  attention 1x16384x32x8x80,1x24576x16x4x112,1x8192x32x8x160
  attention_window 256 1x20480x32x8x128,1x6144x24x8x64
  attention_window 384 1x16384x32x8x128
  attention_window 1536 1x24576x40x8x128
  attention_window 3072 1x32768x32x8x80
  ;;
heldout11)
  attention_window 128 2x16384x64x8x64
  attention_window 256 1x12288x40x8x128,2x8192x32x4x128
  attention_window 512 1x24576x16x2x64,1x49152x32x8x128
  attention_window 2048 1x40960x32x8x128,1x20480x24x8x96
  attention_window 8192 1x98304x32x8x128,1x32768x16x4x128
  ;;
heldout10)
  attention_window 128 1x4096x64x8x64,1x8192x64x8x64,1x32768x64x8x64,4x4096x64x8x64
  attention_window 1024 1x16384x32x16x128,1x65536x32x8x128
  attention_window 4096 1x32768x32x8x128,1x131072x32x8x128,1x16384x48x8x128
  ;;
moe_dev)
  # Development measurements (session 10): the grouped expert GEMMs of the first two held-out
  # sets' MoE shapes again, with the runner's per-shape-bucket cuBLASLt algorithm cache (the
  # earlier runs asked cuBLASLt's heuristic on every new per-expert shape, on the host).
  moe moe_qwen3_ep1_s10 8192 2048 768 128 8 balanced,zipf:1.2
  moe moe_mixtral_ep1_s10 8192 4096 14336 8 2 balanced,zipf:1.2
  moe moe_dsv2lite_ep1_s10 8192 2048 1408 64 6 balanced,zipf:0.8,zipf:1.5
  ;;
heldout9)
  kernels 136x7168x4096,88x6144x5120,232x4096x6144,24x16384x4096,12288x56x4096,18432x16x5120,7168x128x3584,\
30720x8x4096,1408x1408x1408,1024x2048x2560,2304x1152x2304,6656x5120x4096,4608x12288x2048,12288x4608x1280,10240x8192x512 \
    832x6144x4096,2560x10240x2048,14336x3072x3072,5632x5632x2048 88K 28M \
    1x88Kx32x8x128,1x120Kx24x8x128,1x152Kx32x8x128,1x208Kx16x8x128,1x96Kx32x8x192,1x184Kx32x8x64,1x60Kx32x8x128,2x24Kx32x8x128
  moe moe_qwen3_30b_t28k_ep1 28672 2048 768 128 8 balanced,zipf:1.2
  moe moe_dsv2lite_t18k_ep1 18432 2048 1408 64 6 balanced,zipf:0.8
  moe moe_mixtral_t14k_ep1 14336 4096 14336 8 2 balanced,zipf:1.0
  moe moe_gptoss_t20k_ep1 20480 2880 2880 128 4 balanced,zipf:1.2
  ;;
heldout8)
  kernels 176x6144x4096,104x8192x3072,264x5120x6144,40x12288x4096,14336x48x4096,9216x24x7168,26624x8x2048,\
5120x192x4096,1152x1152x1152,896x1792x1792,2816x1408x2816,7168x6144x3072,3584x14336x2048,16384x3584x1536,8192x7168x640 \
    704x5120x4096,3072x9216x2048,12288x2560x3584,4608x4608x1792 120K 30M \
    1x72Kx32x8x128,2x14Kx40x8x128,1x136Kx16x4x128,1x168Kx32x8x128,1x28Kx32x8x64,5x3Kx32x8x128
  moe moe_qwen3_30b_t20k_ep1 20480 2048 768 128 8 balanced,zipf:0.8
  moe moe_dsv2lite_t20k_ep1 20480 2048 1408 64 6 balanced,zipf:1.0
  moe moe_mixtral_t10k_ep1 10240 4096 14336 8 2 balanced,zipf:1.2
  moe moe_gptoss_t12k_ep1 12288 2880 2880 128 4 balanced,zipf:0.8
  ;;
heldout7)
  kernels 144x5120x4096,240x6144x2048,56x8192x6144,288x7168x4096,12288x40x4096,20480x8x6144,7168x96x3072,\
36864x16x2048,1024x1024x2048,1664x1664x1664,2304x4608x2304,6144x8192x4096,3072x12288x2048,14336x4096x1280,10240x6144x896 \
    576x6144x4096,2816x8192x2560,10240x3072x3072,5120x5120x1536 104K 26M \
    1x56Kx32x8x128,3x10Kx32x8x128,1x112Kx24x8x128,1x200Kx32x8x128,1x24Kx48x8x64,6x2Kx32x8x128
  moe moe_qwen3_30b_t16k_ep1 16384 2048 768 128 8 balanced,zipf:1.0
  moe moe_dsv2lite_t12k_ep1 12288 2048 1408 64 6 balanced,zipf:1.2
  moe moe_mixtral_t20k_ep1 20480 4096 14336 8 2 balanced,zipf:0.8
  moe moe_gptoss_t24k_ep1 24576 2880 2880 128 4 balanced,zipf:1.0
  ;;
heldout6)
  kernels 112x6144x4096,208x8192x3072,72x12288x4096,320x4096x7168,10240x32x4096,28672x8x3072,6144x160x2048,\
16384x24x4096,768x768x1536,1536x3072x1536,3328x3328x3328,5120x13824x4096,2560x7168x2048,12288x3072x1024,9216x5120x768 \
    448x4096x8192,3584x7168x2048,8192x2048x3584,6144x3072x1024 88K 22M \
    1x40Kx32x8x128,2x12Kx24x8x128,1x96Kx16x4x128,1x176Kx32x8x128,1x20Kx48x8x64,8x2Kx32x8x128
  moe moe_qwen3_235b_slice64_ep1 8192 4096 1536 64 8 balanced,zipf:0.8
  moe moe_dsv2lite_t24k_ep1 24576 2048 1408 64 6 balanced,zipf:1.0
  moe moe_mixtral_t16k_ep1 16384 4096 14336 8 2 balanced,zipf:1.0
  moe moe_gptoss_t16k_ep1 16384 2880 2880 128 4 balanced,zipf:0.8
  ;;
heldout5)
  kernels 96x7168x4096,176x4096x8192,48x5120x14336,384x8192x2048,12288x48x4096,20480x16x5120,4096x96x6144,\
24576x8x2048,640x640x640,1280x1280x2560,2816x2816x2816,6144x11008x4096,3072x8192x3072,16384x1408x2048,7168x7168x2048 \
    320x6144x4096,1536x12288x3072,9216x4096x4096,640x5120x13824 72K 18M \
    1x28Kx32x8x128,2x10Kx32x8x128,1x64Kx24x8x128,1x144Kx32x8x128,1x16Kx64x8x64,4x4Kx40x8x128
  moe moe_gptoss_t32k_ep1 32768 2880 2880 128 4 balanced,zipf:1.2
  moe moe_mixtral_t12k_ep1 12288 4096 14336 8 2 balanced,zipf:0.8
  moe moe_dsv3slice64_ep1 4096 7168 2048 64 8 balanced,zipf:1.2
  moe moe_qwen3_30b_t12k_ep1 12288 2048 768 128 8 balanced,zipf:0.8
  ;;
heldout4)
  kernels 80x8192x4096,224x5120x5120,40x14336x8192,512x2048x14336,8192x40x4096,16384x24x7168,6144x100x4096,\
32768x16x2048,896x896x896,1792x1792x1792,3584x3584x3584,4096x13824x5120,8192x2816x2048,10240x5120x2560,2048x6400x3200 \
    384x5120x5120,2560x10240x2560,12288x4096x2048,768x14336x4096 56K 14M \
    1x20Kx32x8x128,2x6Kx40x8x128,1x80Kx32x4x128,1x36Kx64x8x128,1x10Kx24x8x64,3x3Kx32x8x128
  moe moe_mixtral_t6k_ep1 6144 4096 14336 8 2 balanced,zipf:0.6
  moe moe_qwen3_235b_slice_ep1 8192 4096 1536 32 8 balanced,zipf:1.0
  moe moe_dsv2lite_t16k_ep1 16384 2048 1408 64 6 balanced,zipf:0.5
  ;;
heldout3)
  kernels 64x14336x4096,160x8192x4096,320x6144x6144,48x4096x14336,16384x32x4096,8192x256x7168,4096x128x2048,\
24576x60x5120,1280x1280x1280,2560x2560x2560,8192x6144x4096,2048x2048x8192,12288x4096x4096,4096x7168x2048,2048x1536x4096 \
    256x7168x2048,4096x4096x4096,1024x8192x2048,6144x6144x6144 80K 10M \
    2x8Kx32x8x128,1x24Kx64x8x128,1x112Kx32x8x128,1x48Kx40x8x128,1x12Kx16x2x64,1x32Kx32x8x192
  moe moe_qwen3_t4k_ep1 4096 2048 768 128 8 balanced,zipf:1.0
  moe moe_dsv3slice_ep1 4096 7168 2048 32 8 balanced,zipf:1.0
  moe moe_olmoe_ep1 8192 2048 1024 64 8 balanced,zipf:1.0
  ;;
heldout2)
  kernels 32x8192x8192,96x5120x5120,192x7168x2048,384x4096x11008,128x28672x8192,8192x16x4096,12288x64x5120,\
32768x8x4096,8192x160x5120,4096x32x2048,768x768x768,1536x1536x1536,3072x3072x3072,8192x3072x3072,4096x11008x4096,\
16384x1024x4096,2048x28672x8192,6144x2560x2560 \
    192x4096x4096,512x8192x8192,1536x1536x1536,3072x3072x3072,16384x2048x7168,8192x3072x3072 96K 12M \
    1x160Kx32x8x128,1x224Kx16x8x128,1x96Kx40x8x128,1x8Kx16x4x128,4x2Kx32x8x128,1x48Kx32x8x64
  moe moe_dsv2lite_ep1 8192 2048 1408 64 6 balanced,zipf:0.8,zipf:1.5
  moe moe_mixtral22b_ep1 4096 6144 16384 8 2 balanced,zipf:1.5
  ;;
heldout)
  kernels 64x4096x4096,128x4096x4096,256x4096x4096,128x14336x4096,256x8192x8192,256x4096x14336,4096x8x4096,\
16384x8x4096,8192x128x2048,8192x128x4096,4096x256x7168,16384x256x7168,512x512x512,1024x1024x1024,2048x2048x2048,\
8192x1536x7168,8192x576x7168,4096x5120x5120,16384x2048x7168 \
    128x4096x4096,256x4096x4096,256x8192x8192,1024x1024x1024,2048x2048x2048,8192x1536x7168 64K 8M \
    1x192Kx32x8x128,1x256Kx32x8x128,1x128Kx16x4x64,1x4Kx8x8x128,2x2Kx16x4x128,1x32Kx64x8x128
  moe moe_mixtral_ep1 8192 4096 14336 8 2 balanced,zipf:1.2
  moe moe_qwen3_ep1 8192 2048 768 128 8 balanced,zipf:1.2
  ;;
*) echo "unknown set ${1}: build, heldout, heldout2 .. heldout20, moe_dev or moe19_dev"; exit 2 ;;
esac
section done
