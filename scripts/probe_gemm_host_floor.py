#!/usr/bin/env python3
"""GPU-only vs host-inclusive time of small BF16 GEMMs on one GPU (session 16, issue 12).

For each shape, N back-to-back torch.matmul calls are timed three ways with CUDA events:
  eager      - the Python loop enqueues each call (host-inclusive, like lcm-exec's ungated loops);
  gated      - the same loop enqueued behind a spinning kernel, so the GPU starts only once all
               N calls are queued (GPU time only);
  graph      - the N calls captured in one CUDA graph and replayed (GPU time only, no launch gaps).
Operands rotate over sets larger than L2 so every call reads from HBM, as lcm-exec does.
Writes JSON (per shape: us per call for each way) to the path given as argv[1].
"""
import sys, time
import torch

from jsonio import write_json_atomic

SHAPES = [  # m, n, k: experts of 256 rows (Qwen3-like), DeepSeek-V2-Lite-like 768 rows, small dense, skinny
    (256, 2048, 768), (256, 1536, 2048), (768, 2816, 2048), (768, 2048, 1408), (128, 2880, 2880),
    (512, 5760, 2880), (640, 640, 640), (768, 768, 768), (1536, 1536, 1536), (64, 4096, 4096),
    (4096, 32, 2048), (4096, 128, 2048), (8192, 64, 4096), (16384, 8, 4096), (4096, 4096, 4096),
]
N = 200
L2 = torch.cuda.get_device_properties(0).L2_cache_size


def spin(ms):
    # torch.cuda._sleep spins for a number of cycles; ~1.98 GHz on H200 at boost.
    torch.cuda._sleep(int(ms * 1.98e6))


def main():
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "calls": N, "points": []}
    dev = torch.device("cuda")
    for (m, n, k) in SHAPES:
        set_bytes = 2 * (m * k + k * n + m * n)
        sets = max(1, min(64, -(-2 * L2 // set_bytes)))
        A = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        B = [torch.randn(k, n, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        C = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(sets)]

        def loop():
            for i in range(N):
                j = i % sets
                torch.matmul(A[j], B[j], out=C[j])

        for _ in range(3):
            loop()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        res = {"m": m, "n": n, "k": k, "sets": sets}
        # eager (host-inclusive)
        best = 1e9
        for _ in range(5):
            torch.cuda.synchronize()
            e0.record(); loop(); e1.record(); torch.cuda.synchronize()
            best = min(best, e0.elapsed_time(e1))
        res["eager_us"] = 1000 * best / N
        # host enqueue rate alone
        torch.cuda.synchronize()
        t0 = time.perf_counter(); loop(); t1 = time.perf_counter(); torch.cuda.synchronize()
        res["host_enqueue_us"] = 1e6 * (t1 - t0) / N
        # gated: spin long enough to enqueue everything first
        best = 1e9
        for _ in range(5):
            torch.cuda.synchronize()
            spin(max(20.0, 0.08 * N))
            e0.record(); loop(); e1.record(); torch.cuda.synchronize()
            best = min(best, e0.elapsed_time(e1))
        res["gated_us"] = 1000 * best / N
        # graph replay
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            loop()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            loop()
        best = 1e9
        for _ in range(5):
            torch.cuda.synchronize()
            e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
            best = min(best, e0.elapsed_time(e1))
        res["graph_us"] = 1000 * best / N
        out["points"].append(res)
        print(f"{m}x{n}x{k}: eager {res['eager_us']:.2f} us  gated {res['gated_us']:.2f}  graph {res['graph_us']:.2f}  host {res['host_enqueue_us']:.2f}", flush=True)
        del A, B, C, g
        torch.cuda.empty_cache()
    write_json_atomic(sys.argv[1], out)


if __name__ == "__main__":
    main()
