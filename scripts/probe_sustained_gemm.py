#!/usr/bin/env python3
"""GEMM throughput over minutes of sustained load, with the GPU's clock, power and temperature
(session 35, issue 12).

lcm's GEMM terms come from kernels timed after a warm-up of 0.5-3 s (lcm-exec bench gemm;
scripts/probe_fp8_fast_accum.py): by then a 700 W H100 / H200 has dropped its SM clock to the
power limit, but the GPU is still cool. A training job runs for hours, and a hotter die leaks
more power, so at the same power limit it may clock lower still. This probe measures how far:

  idle     `--idle` s with no work (the starting temperature);
  fp8      8192^3 FP8 GEMMs (torch._scaled_mm, per-tensor scales, bf16 out) back to back for
           `--fp8` s;
  cool     `--cool` s idle;
  bf16     8192^3 BF16 GEMMs (torch.matmul) for `--bf16` s;
  mixed    `--mixed` s of a step-like duty cycle: a burst of FP8 GEMMs, then a burst of
           large device copies (memory-bound, lower power) of about the same length; the GEMM
           bursts are timed alone, so their rate says whether GEMMs inside a mixed step run
           faster than in a pure GEMM loop.

Every window (about `--window` s of work, ended by an event sync) records its start time, the
work's TFLOP/s or GB/s, and the nvidia-smi samples taken during it (`nvidia-smi
--query-gpu=... -lms`, a subprocess, so nothing in this process polls the driver between
kernels). Operands rotate over sets larger than L2, so every GEMM reads HBM.
Writes JSON to argv[1]; prints one line per phase with the first and last windows' rates.
"""
import argparse
import subprocess
import threading
import time

import torch

from jsonio import write_json_atomic

SMI_FIELDS = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


class Smi:
    """nvidia-smi sampling every `ms` milliseconds in a subprocess; samples carry host times."""

    def __init__(self, ms):
        self.samples = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", str(torch.cuda.current_device()),
             f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", f"-lms={ms}"],
            stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 5:
                continue
            try:
                self.samples.append({"t": time.time(), "sm_mhz": float(parts[0]),
                                     "mem_mhz": float(parts[1]), "power_w": float(parts[2]),
                                     "temp_c": float(parts[3]), "throttle": parts[4]})
            except ValueError:
                continue

    def between(self, t0, t1):
        return [s for s in self.samples if t0 <= s["t"] <= t1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def summarise(smi, t0, t1):
    ss = smi.between(t0, t1)
    return {"samples": len(ss),
            "sm_mhz": median([s["sm_mhz"] for s in ss]),
            "power_w": median([s["power_w"] for s in ss]),
            "temp_c": median([s["temp_c"] for s in ss]),
            "throttle": sorted({s["throttle"] for s in ss})}


def gemm_operands(dtype, n, sets):
    dev = torch.device("cuda")
    if dtype == "fp8":
        A = [torch.randn(n, n, device=dev).to(torch.float8_e4m3fn) for _ in range(sets)]
        B = [torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t() for _ in range(sets)]
        one = torch.ones((), device=dev, dtype=torch.float32)

        def call(i):
            return torch._scaled_mm(A[i % sets], B[i % sets], scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
    else:
        A = [torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        B = [torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(sets)]

        def call(i):
            return torch.matmul(A[i % sets], B[i % sets])
    return call


def timed_window(fn, per_call_guess_s, window_s, i0):
    """Runs fn(i) back to back for about window_s of GPU time; returns (calls, gpu seconds)."""
    calls = max(1, int(window_s / per_call_guess_s))
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for i in range(calls):
        fn(i0 + i)
    e1.record()
    e1.synchronize()
    return calls, e0.elapsed_time(e1) / 1e3


def gemm_phase(name, dtype, seconds, window, smi, n=8192, sets=4):
    call = gemm_operands(dtype, n, sets)
    flops = 2.0 * n ** 3
    guess = flops / (1200e12 if dtype == "fp8" else 700e12)
    windows, i, start = [], 0, time.time()
    while time.time() - start < seconds:
        t0 = time.time()
        calls, gpu_s = timed_window(call, guess, window, i)
        t1 = time.time()
        i += calls
        guess = gpu_s / calls
        w = {"t_s": t0 - start, "calls": calls, "gpu_s": gpu_s,
             "tflops": flops * calls / gpu_s / 1e12}
        w.update(summarise(smi, t0, t1))
        windows.append(w)
    return {"phase": name, "dtype": dtype, "shape": f"{n}x{n}x{n}", "seconds": seconds,
            "windows": windows}


def idle_phase(name, seconds, smi):
    t0 = time.time()
    time.sleep(seconds)
    return {"phase": name, "seconds": seconds, "summary": summarise(smi, t0, time.time())}


def mixed_phase(seconds, window, smi, n=8192, sets=4):
    """FP8 GEMM bursts alternating with copy bursts of about the same GPU time."""
    gemm = gemm_operands("fp8", n, sets)
    flops = 2.0 * n ** 3
    dev = torch.device("cuda")
    nbytes = 512 << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_(0, 255)
    dst = torch.empty_like(src)
    windows, i, start = [], 0, time.time()
    g_guess, c_guess = flops / 1200e12, 2 * nbytes / 2.9e12
    while time.time() - start < seconds:
        t0 = time.time()
        calls, gpu_s = timed_window(gemm, g_guess, window / 2, i)
        i += calls
        g_guess = gpu_s / calls
        ccalls, cgpu_s = timed_window(lambda _: dst.copy_(src), c_guess, window / 2, 0)
        c_guess = cgpu_s / ccalls
        t1 = time.time()
        w = {"t_s": t0 - start, "gemm_calls": calls, "gemm_gpu_s": gpu_s,
             "tflops": flops * calls / gpu_s / 1e12, "copy_calls": ccalls, "copy_gpu_s": cgpu_s,
             "copy_GBps": 2 * nbytes * ccalls / cgpu_s / 1e9}
        w.update(summarise(smi, t0, t1))
        windows.append(w)
    return {"phase": "mixed", "dtype": "fp8 + copy", "seconds": seconds, "windows": windows}


def report(ph):
    ws = ph.get("windows")
    if not ws:
        s = ph["summary"]
        print(f"{ph['phase']:6s} {ph['seconds']:5.0f} s idle: {s['temp_c']} C, {s['power_w']} W, "
              f"{s['sm_mhz']} MHz", flush=True)
        return
    def line(w):
        return (f"t={w['t_s']:6.1f}s {w['tflops']:7.1f} TFLOP/s  {w['sm_mhz']} MHz "
                f"{w['power_w']} W {w['temp_c']} C")
    print(f"{ph['phase']:6s} first {line(ws[0])}", flush=True)
    if len(ws) > 2:
        print(f"{'':6s} 2nd   {line(ws[1])}", flush=True)
    print(f"{'':6s} last  {line(ws[-1])}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--idle", type=float, default=5)
    p.add_argument("--fp8", type=float, default=120)
    p.add_argument("--cool", type=float, default=30)
    p.add_argument("--bf16", type=float, default=90)
    p.add_argument("--mixed", type=float, default=60)
    p.add_argument("--window", type=float, default=0.25)
    p.add_argument("--smi-ms", type=int, default=100)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    smi = Smi(a.smi_ms)
    time.sleep(1.0)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "window_s": a.window, "smi_ms": a.smi_ms, "phases": []}
    try:
        q = subprocess.run(["nvidia-smi", "-q", "-d", "POWER,CLOCK,TEMPERATURE,PERFORMANCE"],
                           capture_output=True, text=True)
        out["nvidia_smi_q"] = q.stdout
    except OSError as e:
        out["nvidia_smi_q"] = str(e)
    plan = [lambda: idle_phase("idle", a.idle, smi),
            lambda: gemm_phase("fp8", "fp8", a.fp8, a.window, smi),
            lambda: idle_phase("cool", a.cool, smi),
            lambda: gemm_phase("bf16", "bf16", a.bf16, a.window, smi),
            lambda: mixed_phase(a.mixed, a.window, smi)]
    for step in plan:
        ph = step()
        out["phases"].append(ph)
        report(ph)
        torch.cuda.empty_cache()
    smi.stop()
    write_json_atomic(a.out, out)


if __name__ == "__main__":
    main()
