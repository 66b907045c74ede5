"""The unfused-attention held-out cases and their points in lcm-exec's summary format, shared by
scripts/probe_unfused_attention.py (which measures them) and scripts/score_unfused_attention.py
(which prices them); torch-free, so the scorer runs where torch is not installed."""

# b, s, hq, hkv, d_qk, d_v, dropout: the cases declared in
# validation/measured/h100/unfused_attention/DECLARATION.md (keep them in step).
CASES = [
    (4, 1024, 8, 8, 64, 64, 0.0),       # Megatron CI's small GPT (h 512, 8 heads, mbs 4, 1K)
    (2, 2048, 16, 4, 128, 128, 0.0),    # GQA 4:1
    (1, 4096, 32, 8, 128, 128, 0.0),    # Llama-3-8B-like at TP 1, the fused kernel's limit
    (1, 4096, 16, 16, 128, 128, 0.1),   # attention dropout
    (2, 2048, 16, 16, 192, 128, 0.0),   # MLA-like head dims
    (8, 512, 16, 16, 64, 64, 0.0),      # short sequences, many problems
    (1, 8192, 8, 8, 128, 128, 0.0),     # past 4096 keys: the torch fp32 softmax
    (1, 8192, 16, 4, 128, 128, 0.1),    # fp32 softmax, GQA, dropout
    (1, 12288, 8, 2, 64, 64, 0.0),      # fp32 softmax, GQA, head dim 64
    (1, 16384, 4, 4, 128, 128, 0.0),    # fp32 softmax, long
]


def case_name(case):
    b, s, hq, hkv, dqk, dv, p = case
    return f"unfused/b{b}/s{s}/hq{hq}/hkv{hkv}/d{dqk}x{dv}/p{p}"


def point(case, pas, time_us, correct=True, extra=None):
    """One pass of a case as a summary point: its key, the measured time (median, and p10 / p90
    when given) and the explicit model op `lcm calibrate` prices (causal, unfused)."""
    b, s, hq, hkv, dqk, dv, p = case
    pt = {"family": "unfused-attention", "key": f"{case_name(case)}/{pas}", "op": f"attn.core.{pas}",
          "correct": correct, "time_us": time_us,
          "model_op": {"kind": "attention", "b": b, "s_q": s, "s_kv": s, "hq": hq, "hkv": hkv, "d": dqk, "d_v": dv,
                       "work_fraction": 0.5, "unfused": True, "dropout": p > 0, "pass": pas}}
    if extra is not None:
        pt["extra"] = extra
    return pt
