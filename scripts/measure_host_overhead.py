#!/usr/bin/env python3
"""Host-side costs of a PyTorch eager training step, for the `host:` block of a hardware profile
(docs/time-model.md, "Host-bound regime"; model/include/lcm/model/specs.hpp HostSpec).

Measures on the current GPU, in microseconds:
  kernel_launch_ungated  host time per small eager op enqueued back to back (x.add_(1) on a 1 KiB
                         tensor): the host may wait on a full launch queue, so this is
                         max(host cost, GPU time) per op;
  kernel_launch_gated    the same ops queued behind a long GPU sleep (torch.cuda._sleep), so the
                         GPU is busy and only the host's enqueue cost is timed;
  small_op_gpu           GPU time per small op (CUDA events around the back-to-back ops);
  sync                   round trip of a device-to-host synchronisation on an idle GPU
                         (tensor.item() of a 1-element tensor after one tiny op), minus one launch;
  launch_latency         enqueue-to-start of one kernel on an idle GPU (event pair around a tiny op
                         after a synchronize, GPU time of the op subtracted);
  layer_overhead_fwd/bwd Python per transformer layer per pass beyond its kernels: host time of a
                         small eager layer (LayerNorm, QKV, SDPA, projection, MLP), gated, minus
                         kernels x kernel_launch_gated (kernels counted with torch.profiler).
Collective latencies at small sizes come from nccl-tests; this script needs one GPU.

Usage: python3 scripts/measure_host_overhead.py --out FILE.json   (about 10-30 s)
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def sleep_cycles_for(us):
    # torch.cuda._sleep spins for a number of cycles; calibrate cycles per microsecond once.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    per_us = cycles / (start.elapsed_time(end) * 1e3)
    return int(per_us * us)


def host_per_op(fn, n, gate_cycles):
    """Host seconds per call of fn over n calls; gate_cycles > 0 queues them behind a GPU sleep."""
    torch.cuda.synchronize()
    if gate_cycles:
        torch.cuda._sleep(gate_cycles)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n


def gpu_per_op(fn, n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e-3 / n


def median(xs):
    return statistics.median(xs)


class Layer(torch.nn.Module):
    """A small pre-norm transformer layer in plain PyTorch (the Megatron layer's kernel sequence)."""

    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.qkv, self.proj = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
        self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def count_kernels(fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', required=True, help='JSON file to write')
    ap.add_argument('--repeats', type=int, default=7)
    args = ap.parse_args()
    assert torch.cuda.is_available(), 'needs a CUDA GPU'
    dev = torch.device('cuda')
    x = torch.zeros(256, device=dev)
    op = lambda: x.add_(1)  # noqa: E731
    n = 2000
    gate = sleep_cycles_for(200_000)  # 200 ms of GPU sleep: longer than n enqueues
    for _ in range(3):  # warm-up
        host_per_op(op, 200, 0)
    ungated = median([host_per_op(op, n, 0) for _ in range(args.repeats)])
    # Gated runs stay below CUDA's launch-queue depth (~1024 pending kernels), or the host would
    # block on a full queue behind the sleep.
    gated = median([host_per_op(op, 500, gate) for _ in range(args.repeats)])
    small_gpu = median([gpu_per_op(op, n) for _ in range(args.repeats)])

    # Sync round trip: one tiny op then .item() on an idle GPU, minus the op's own launch.
    syncs = []
    for _ in range(200):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.add_(1)
        x[0].item()
        syncs.append(time.perf_counter() - t0)
    sync = max(0.0, median(syncs) - gated)

    # Launch latency: host timestamp of enqueue to GPU start, via an event recorded just before.
    lat = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(200):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        op()
        end.record()
        end.synchronize()
        wall = time.perf_counter() - t0
        lat.append(max(0.0, wall - start.elapsed_time(end) * 1e-3 - sync))
    launch_latency = median(lat)

    # A small layer, forward and backward, gated: host time minus kernels x per-kernel cost.
    h, heads, tokens = 256, 4, 64
    layer = Layer(h, heads).to(dev, torch.bfloat16)
    inp = torch.randn(1, tokens, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    fwd = lambda: layer(inp)  # noqa: E731
    out = fwd()
    grad = torch.ones_like(out)
    bwd_graph = lambda: fwd().backward(grad)  # noqa: E731
    for _ in range(5):
        bwd_graph()
    k_fwd = count_kernels(fwd)
    k_all = count_kernels(bwd_graph)
    t_fwd = median([host_per_op(fwd, 4, gate) for _ in range(args.repeats)])
    t_all = median([host_per_op(bwd_graph, 4, gate) for _ in range(args.repeats)])
    over_fwd = t_fwd - k_fwd * gated
    over_bwd = (t_all - t_fwd) - (k_all - k_fwd) * gated

    us = 1e6
    result = {
        'gpu': torch.cuda.get_device_name(),
        'torch': torch.__version__,
        'cuda': torch.version.cuda,
        'kernel_launch_ungated_us': ungated * us,
        'kernel_launch_gated_us': gated * us,
        'small_op_gpu_us': small_gpu * us,
        'sync_us': sync * us,
        'launch_latency_us': launch_latency * us,
        'layer': {'hidden': h, 'tokens': tokens, 'kernels_fwd': k_fwd, 'kernels_fwd_bwd': k_all,
                  'host_fwd_us': t_fwd * us, 'host_fwd_bwd_us': t_all * us},
        'layer_overhead_fwd_us': over_fwd * us,
        'layer_overhead_bwd_us': over_bwd * us,
        'profile_host_block': {
            'kernel_launch_us': round(gated * us, 2),
            'launch_latency_us': round(launch_latency * us, 2),
            'sync_us': round(sync * us, 2),
            # A small plain-PyTorch layer's Python: a lower bound of a framework's. Megatron's
            # own layers (and an MoE layer's extra) come from scripts/device_run_megatron_host.sh
            # and scripts/megatron_host_fit.py; without those, the MoE keys are not measured.
            'layer_overhead_fwd_us': round(max(0.0, over_fwd) * us, 1),
            'layer_overhead_bwd_us': round(max(0.0, over_bwd) * us, 1),
        },
    }
    with open(args.out, 'w') as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == '__main__':
    main()
