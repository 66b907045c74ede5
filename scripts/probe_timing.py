"""CUDA-event timing shared by the device probes (scripts/probe_*.py); imported from the
probe's own directory, which Python puts on sys.path when the probe is run as a script."""
import statistics
import time

import torch


def timed(fn, reps):
    """Mean microseconds per call of `reps` back-to-back calls, timed by CUDA events."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / reps  # us


def interleaved_samples(fns, rounds, reps):
    """Each function's per-round times: two warm-up calls each, then `rounds` rounds of `reps`
    calls, the order reversed every other round so that drift falls on all of them alike."""
    for f in fns.values():
        timed(f, 2)
    res = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            res[k].append(timed(fns[k], reps))
    return res


def sustained_median_us(fns, warmup_ms, reps):
    """Median microseconds of one call after keeping the GPU busy for `warmup_ms` (a
    power-limited GPU reaches its sustained clock first), one CUDA-event pair per repetition.
    `fns` is one callable or a list of them, called in turn (one per rotated buffer set)."""
    fns = fns if isinstance(fns, (list, tuple)) else [fns]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while True:
        fns[n % len(fns)]()
        n += 1
        if n % 4 == 0:
            torch.cuda.synchronize()
            if (time.perf_counter() - t0) * 1e3 >= warmup_ms:
                break
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record()
        fns[i % len(fns)]()
        b.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(a.elapsed_time(b) for a, b in ev)
