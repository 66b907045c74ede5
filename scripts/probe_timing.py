"""CUDA-event timing shared by the device probes (scripts/probe_*.py); imported from the
probe's own directory, which Python puts on sys.path when the probe is run as a script."""
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
