#!/usr/bin/env python3
"""lcm-exec against PyTorch on the same GPUs, with the same timing method.

Reads lcm-exec's summary.json files, measures the same points through PyTorch and writes a
side-by-side table (docs/executor.md, "Measured on H200"):

  GEMM:        torch.matmul (bf16, contiguous A[m,k] @ B[k,n], out=) and torch._scaled_mm
               (fp8 e4m3, A[m,k] @ W[n,k].T, bf16 out, the same per-tensor scales) for every
               shape lcm-exec measured.
  Collectives: torch.distributed (NCCL backend, one process per GPU through mp.spawn)
               all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single
               for every size >= --min-coll-bytes that lcm-exec measured.

Method, identical to lcm-exec's: inputs uniform in [-1, 1) rounded to the input type, warm-up,
one pair of CUDA events around every repetition, buffer rotation over at least
max(100 MB, 2 x L2) of distinct buffers (repetitions raised to the number of sets), median over
repetitions; for collectives each iteration's time is averaged over the ranks first
(nccl-tests -a 1) and busbw = algbw x the nccl-tests factor (2(n-1)/n all-reduce, (n-1)/n
the others).

GEMM warm-up also runs for at least --warmup-ms (500 ms, as lcm-exec's default) so the
power-limited clocks settle; lcm-exec and torch GEMM runs are interleaved A-B-B-A by
scripts/device_run.sh and averaged, so neither side profits from a cooler GPU.

usage:
  compare_torch.py gemm  --lcm gemm/summary.json --out torch_gemm.json [--passes 2]
  compare_torch.py coll  --lcm coll/summary.json --out torch_coll.json
  compare_torch.py table --lcm-gemm A.json [A2.json] --torch-gemm torch_gemm.json
                         --lcm-coll coll.json --torch-coll torch_coll.json [--lcm-coll-alt X.json]
                         --out comparison.md
"""
import argparse
import json
import math
import os
import socket
import statistics
import sys
import time


def rotation_bytes(l2_bytes):
    return max(100e6, 2.0 * l2_bytes)


def rotation_sets(set_bytes, rot, max_sets):
    return int(min(max_sets, max(1, math.ceil(rot / set_bytes))))


def median(xs):
    return statistics.median(xs)


# ----------------------------------------------------------------------------- GEMM
def torch_gemm(points, warmup, warmup_s, iters):
    import torch

    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(0)
    rot = rotation_bytes(props.L2_cache_size)
    results = []
    for p in points:
        m, n, k = (int(x) for x in p["shape"].split("x"))
        fp8 = p["dtype"] != "bf16"
        set_bytes = (m * k + k * n) * (1 if fp8 else 2) + 2 * m * n
        sets = rotation_sets(set_bytes, rot, 64)
        reps = max(iters, sets)
        bufs = []
        for _ in range(sets):
            a = torch.rand(m, k, device=dev).mul_(2).sub_(1)
            if fp8:
                w = torch.rand(n, k, device=dev).mul_(2).sub_(1)
                bufs.append((a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn),
                             torch.empty(m, n, device=dev, dtype=torch.bfloat16)))
            else:
                b = torch.rand(k, n, device=dev).mul_(2).sub_(1)
                bufs.append((a.to(torch.bfloat16), b.to(torch.bfloat16),
                             torch.empty(m, n, device=dev, dtype=torch.bfloat16)))
            del a
        sa = torch.tensor(0.5, device=dev)
        sb = torch.tensor(0.25, device=dev)

        if fp8:
            def run(i):
                a8, w8, c = bufs[i % sets]
                try:
                    return torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=c)
                except TypeError:
                    return torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        else:
            def run(i):
                a, b, c = bufs[i % sets]
                return torch.matmul(a, b, out=c)

        try:
            done, t0 = 0, time.perf_counter()
            while done < warmup or time.perf_counter() - t0 < warmup_s:
                for _ in range(max(warmup, 1)):
                    run(done)
                    done += 1
                torch.cuda.synchronize()
        except RuntimeError as e:  # e.g. no fp8 support in this build
            results.append({"shape": p["shape"], "dtype": p["dtype"], "label": p.get("label", ""), "error": str(e)})
            continue
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        out = None
        for i in range(reps):
            starts[i].record()
            out = run(i)
            ends[i].record()
        torch.cuda.synchronize()
        times_us = [1000.0 * s.elapsed_time(e) for s, e in zip(starts, ends)]
        # Sanity check of the last product on 16 rows against float64.
        a_, b_, _ = bufs[(reps - 1) % sets]
        rows = torch.linspace(0, m - 1, 16, device=dev).long()
        try:
            if fp8:
                ref = (a_[rows].float().double() @ b_.float().double().t()) * 0.125
            else:
                ref = a_[rows].double() @ b_.double()
            rel = ((out[rows].double() - ref).norm() / ref.norm()).item()
        except RuntimeError as e:
            print(f"  (sanity check skipped: {e})")
            rel = float("nan")
        med = median(times_us)
        results.append({
            "shape": p["shape"], "dtype": p["dtype"], "label": p.get("label", ""), "warmup": done, "reps": reps, "buffers": sets,
            "time_us": {"median": med, "min": min(times_us), "max": max(times_us)},
            "tflops": 2.0 * m * n * k / (med * 1e-6) / 1e12, "rel_l2_error": rel,
        })
        print(f"  torch {p['dtype']:8s} {p['shape']:>22s} {med:10.1f} us {results[-1]['tflops']:8.1f} TFLOP/s "
              f"(rel err {rel:.1e})", flush=True)
        del bufs, out
        torch.cuda.empty_cache()
    return results


# ----------------------------------------------------------------------------- collectives
OPS = {
    "all_reduce": (lambda n: 2.0 * (n - 1) / n),
    "all_gather": (lambda n: (n - 1) / n),
    "reduce_scatter": (lambda n: (n - 1) / n),
    "all_to_all": (lambda n: (n - 1) / n),
}


def coll_worker(rank, world, port, sizes, ops, warmup, iters, result_path):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=dev)
    rot = rotation_bytes(torch.cuda.get_device_properties(rank).L2_cache_size)
    rows = []
    for op in ops:
        for size in sizes:
            total = size // 4
            if op != "all_reduce":
                total = total // world * world
            chunk = total // world
            send_n = chunk if op == "all_gather" else total
            recv_n = chunk if op == "reduce_scatter" else total
            sets = rotation_sets((send_n + recv_n) * 4, rot, 256)
            reps = max(iters, sets)
            bufs = [(torch.rand(send_n, device=dev), torch.empty(recv_n, device=dev)) for _ in range(sets)]

            def run(i):
                s, r = bufs[i % sets]
                if op == "all_reduce":
                    dist.all_reduce(s)  # torch's all_reduce is in place
                elif op == "all_gather":
                    dist.all_gather_into_tensor(r, s)
                elif op == "reduce_scatter":
                    dist.reduce_scatter_tensor(r, s)
                else:
                    dist.all_to_all_single(r, s)

            for i in range(warmup):
                run(i)
            torch.cuda.synchronize()
            dist.barrier()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                starts[i].record()
                run(i)
                ends[i].record()
            torch.cuda.synchronize()
            t = torch.tensor([1000.0 * s.elapsed_time(e) for s, e in zip(starts, ends)], device=dev,
                             dtype=torch.float64)
            dist.all_reduce(t)
            avg = (t / world).tolist()
            med = median(avg)
            algbw = total * 4 / 1e9 / (med * 1e-6)
            rows.append({"collective": op, "size": total * 4, "count": total, "type": "float", "reps": reps,
                         "buffers": sets, "time": med, "time_us": {"median": med, "min": min(avg), "max": max(avg)},
                         "algbw": algbw, "busbw": algbw * OPS[op](world)})
            if rank == 0:
                print(f"  torch {op:15s} {total * 4:12d} B {med:10.1f} us algbw {algbw:7.2f} busbw "
                      f"{rows[-1]['busbw']:7.2f} GB/s", flush=True)
            del bufs
            torch.cuda.empty_cache()
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def torch_collectives(sizes, ops, warmup, iters, world, tmpdir):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.path.join(tmpdir, "torch_coll_rows.json")
    mp.spawn(coll_worker, args=(world, port, sizes, ops, warmup, iters, path), nprocs=world, join=True)
    with open(path) as f:
        return json.load(f)


# ----------------------------------------------------------------------------- report
def load_points(path, family):
    with open(path) as f:
        j = json.load(f)
    return j, [p for p in j["points"] if p["family"] == family and p.get("correct")]


def versions_of_torch():
    import torch
    return {
        "torch": torch.__version__,
        "torch CUDA": torch.version.cuda,
        "torch NCCL": ".".join(str(x) for x in torch.cuda.nccl.version()),
        "torch BLAS backend": str(torch.backends.cuda.preferred_blas_library()),
        "GPU": torch.cuda.get_device_name(0),
    }


def mean(xs):
    return sum(xs) / len(xs)


def gemm_table(lcm_runs, torch_passes):
    """lcm_runs: list of point lists (one per lcm-exec run); torch_passes: list of result lists."""
    lines = ["## GEMM", "",
             "Sustained TFLOP/s at the median repetition, mean over the interleaved runs (lcm-exec A-B-B-A "
             "torch); 'best' uses each side's fastest repetition (full clocks). Target: ratio >= 0.98.", "",
             "| GEMM | dtype | M x N x K | lcm-exec TFLOP/s (runs) | torch TFLOP/s (passes) | ratio | "
             "lcm best | torch best | best ratio |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    keys = [(p["dtype"], p["shape"], p.get("label", "")) for p in lcm_runs[0]]
    worst = None
    for dtype, shape, label in keys:
        m, n, k = (int(x) for x in shape.split("x"))
        fl = 2.0 * m * n * k  # TFLOP/s = fl / time_us / 1e6
        ls = [p for run in lcm_runs for p in run if p["dtype"] == dtype and p["shape"] == shape]
        ts = [r for ps in torch_passes for r in ps if r["dtype"] == dtype and r["shape"] == shape and "tflops" in r]
        if not ls or not ts:
            continue
        lt = [p["tflops"] for p in ls]
        tt = [r["tflops"] for r in ts]
        lbest = max(fl / p["time_us"]["min"] / 1e6 for p in ls)
        tbest = max(fl / r["time_us"]["min"] / 1e6 for r in ts)
        ratio = mean(lt) / mean(tt)
        if dtype == "bf16":
            worst = ratio if worst is None else min(worst, ratio)
        runs = ", ".join(f"{x:.0f}" for x in lt)
        passes = ", ".join(f"{x:.0f}" for x in tt)
        lines.append(f"| {label} | {dtype} | {shape} | {mean(lt):.1f} ({runs}) | {mean(tt):.1f} ({passes}) | "
                     f"{ratio:.3f}{'' if ratio >= 0.98 else ' (below)'} | {lbest:.0f} | {tbest:.0f} | "
                     f"{lbest / tbest:.3f} |")
    lines.append("")
    return lines, worst


def coll_table(lcm, torch_rows, alt):
    lines = ["## Collectives, 2 GPUs, float32, sizes >= 64 MiB", "",
             "busbw GB/s at the median iteration (per-iteration times averaged over the ranks first). "
             "Target: ratio >= 0.97.", "",
             "| collective | size (B) | lcm-exec busbw | torch busbw | ratio | lcm time us | torch time us |"
             + (" lcm-exec on torch's NCCL: busbw | ratio to torch |" if alt else ""),
             "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if alt else "")]
    tmap = {(r["collective"], r["size"]): r for r in torch_rows}
    amap = {(p["collective"], p["size"]): p for p in (alt or [])}
    worst = None
    for p in lcm:
        t = tmap.get((p["collective"], p["size"]))
        if not t:
            continue
        ratio = p["busbw"] / t["busbw"]
        worst = ratio if worst is None else min(worst, ratio)
        row = (f"| {p['collective']} | {p['size']} | {p['busbw']:.1f} | {t['busbw']:.1f} | "
               f"{ratio:.3f}{'' if ratio >= 0.97 else ' (below)'} | {p['time']:.1f} | {t['time']:.1f} |")
        if alt:
            a = amap.get((p["collective"], p["size"]))
            row += f" {a['busbw']:.1f} | {a['busbw'] / t['busbw']:.3f} |" if a else " | |"
        lines.append(row)
    lines.append("")
    return lines, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gemm")
    g.add_argument("--lcm", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--passes", type=int, default=2)
    g.add_argument("--warmup", type=int, default=10)
    g.add_argument("--warmup-ms", type=float, default=500)
    g.add_argument("--iters", type=int, default=50)
    c = sub.add_parser("coll")
    c.add_argument("--lcm", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--min-bytes", type=int, default=64 << 20)
    c.add_argument("--warmup", type=int, default=5)
    c.add_argument("--iters", type=int, default=20)
    t = sub.add_parser("table")
    t.add_argument("--lcm-gemm", nargs="+", default=[])
    t.add_argument("--torch-gemm")
    t.add_argument("--lcm-coll")
    t.add_argument("--torch-coll")
    t.add_argument("--lcm-coll-alt")
    t.add_argument("--min-bytes", type=int, default=64 << 20)
    t.add_argument("--out", required=True)
    a = ap.parse_args()

    if a.cmd == "gemm":
        _, pts = load_points(a.lcm, "gemm")
        passes = []
        for i in range(a.passes):
            print(f"# torch GEMM, pass {i + 1} of {a.passes}", flush=True)
            passes.append(torch_gemm(pts, a.warmup, a.warmup_ms / 1000.0, a.iters))
        with open(a.out, "w") as f:
            json.dump({"versions": versions_of_torch(), "passes": passes}, f, indent=1)
    elif a.cmd == "coll":
        j, pts = load_points(a.lcm, "collectives")
        pts = [p for p in pts if p["size"] >= a.min_bytes and p["collective"] in OPS]
        sizes = sorted({p["size"] for p in pts})
        ops = [o for o in OPS if any(p["collective"] == o for p in pts)]
        print("# torch collectives", flush=True)
        rows = torch_collectives(sizes, ops, a.warmup, a.iters, int(j["world_size"]), os.path.dirname(os.path.abspath(a.out)))
        with open(a.out, "w") as f:
            json.dump({"versions": versions_of_torch(), "rows": rows}, f, indent=1)
    else:
        lines = ["# lcm-exec vs PyTorch on the same GPUs", ""]
        info = {}
        body = []
        if a.lcm_gemm and a.torch_gemm and os.path.exists(a.torch_gemm):
            runs = []
            for i, path in enumerate(a.lcm_gemm):
                if os.path.exists(path):
                    j, pts = load_points(path, "gemm")
                    runs.append(pts)
                    info[f"lcm-exec gemm run {i + 1}"] = "`" + j["command_line"].split("/bin/")[-1] + "`"
                    s = j["system"]
                    info["lcm-exec"] = (f"{j['version']}: CUDA runtime {s['cuda_runtime_version']}, cuBLASLt "
                                        f"{s['cublaslt_version']}, NCCL {s['nccl_version']}, driver {s['driver_version']}, "
                                        f"{s['gpu_name']}")
            with open(a.torch_gemm) as f:
                tg = json.load(f)
            info.update({k: v for k, v in tg["versions"].items()})
            if runs:
                tl, worst = gemm_table(runs, tg["passes"])
                body += tl
                info["GEMM: worst bf16 ratio"] = f"{worst:.3f}" if worst is not None else "n/a"
        if a.lcm_coll and a.torch_coll and os.path.exists(a.torch_coll) and os.path.exists(a.lcm_coll):
            j, pts = load_points(a.lcm_coll, "collectives")
            pts = [p for p in pts if p["size"] >= a.min_bytes and p["collective"] in OPS]
            info["lcm-exec collectives"] = "`" + j["command_line"].split("/bin/")[-1] + "`"
            with open(a.torch_coll) as f:
                tc = json.load(f)
            info.update({k: v for k, v in tc["versions"].items()})
            alt = None
            if a.lcm_coll_alt and os.path.exists(a.lcm_coll_alt):
                ja, alt = load_points(a.lcm_coll_alt, "collectives")
                info["lcm-exec on torch's NCCL"] = f"NCCL {ja['system']['nccl_version']} (LD_LIBRARY_PATH)"
            tl, worst = coll_table(pts, tc["rows"], alt)
            body += tl
            info["collectives: worst busbw ratio"] = f"{worst:.3f}" if worst is not None else "n/a"
        for k, v in info.items():
            lines.append(f"- {k}: {v}")
        lines.append("")
        text = "\n".join(lines + body) + "\n"
        with open(a.out, "w") as f:
            f.write(text)
        print(text)


if __name__ == "__main__":
    sys.exit(main())
