#!/usr/bin/env python3
"""Transcribe NVIDIA/dgxc-benchmarking's H100 pre-training tables (one tag) into the CSV format of
validation/published/dgxc_benchmarking_h100.csv.

    transcribe_dgxc.py REPO_GIT_DIR TAG OUT.csv

Reads, at TAG, llama3.1/README_{8b,70b,405b}.md, nemotron/README_{15b,340b}.md,
nemo_megatron/README_175b.md and grok1/README_314b.md, and each workload's launch.sh for the
container (FW_VERSION). Layouts come from the table headers (TP, PP, CP, VP, MBS, SEQ, GBS per
column), the 405B table's Layers / GBS / PP / VP rows and Grok-1's layout table; full depth and
the workloads' sequence lengths otherwise. Prints only the structure it read (rows per table,
layouts) and the consistency check (tokens/s = gbs x seq / step within 1 %), never a result
cell, so a table can be declared before its numbers are looked at.

From v25.04 on, llama3.1/README.md and nemotron/README.md (NeMo 2.0 recipes) hold one layout
table per model size (Size | Precision | GPUs | SeqLen | Layers | TP | PP | CP | EP | DP | VP |
MBS | GBS | GA; "BF16/FP8" for both precisions) and one result table per size and precision
("Llama 3.1 8b BF16 | 8x H100 GPUs | ..."): those tags are read in that format (COMBINED),
with the launch.sh's FW_VERSION as the container; at such a tag the other workloads' READMEs
(GPT-3 175B, Grok-1) are not transcribed.
"""
import csv
import re
import subprocess
import sys

FILES = [
    ("llama3.1/README_70b.md", "Llama3.1-70B", 8192, 80),
    ("llama3.1/README_8b.md", "Llama3.1-8B", 8192, 32),
    ("nemo_megatron/README_175b.md", "GPT3-175B", 2048, 96),
    ("nemotron/README_15b.md", "Nemotron4-15B", 4096, 32),
    ("nemotron/README_340b.md", "Nemotron4-340B", 4096, 96),
    ("llama3.1/README_405b.md", "Llama3.1-405B", 8192, 126),
    ("grok1/README_314b.md", "Grok-1", 4096, 64),
]


def show(repo, tag, path):
    return subprocess.run(["git", "--git-dir", repo, "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def layout_of(header):
    kv = dict((k.upper(), v) for k, v in re.findall(r"\b(TP|PP|CP|VP|MBS|GA|SEQ)\s*=\s*(\d+)", header))
    return kv


COMBINED = [
    ("llama3.1/README.md", {"8b": ("Llama3.1-8B", 32), "70b": ("Llama3.1-70B", 80), "405b": ("Llama3.1-405B", 126),
                            "405b-proxy": ("Llama3.1-405B", 126)}),
    ("nemotron/README.md", {"15b": ("Nemotron4-15B", 32), "340b": ("Nemotron4-340B", 96)}),
]


def has(repo, tag, path):
    return subprocess.run(["git", "--git-dir", repo, "cat-file", "-e", f"{tag}:{path}"], capture_output=True).returncode == 0


def fill_results(r, step, toks, mfu, j, tag, sha, path):
    """Set a row's result cells (column j) and source; returns 1 when tokens/s disagrees with
    gbs x seq / step by more than 1 %, else 0."""
    r["step_time_s"] = float(re.sub(r"\s+", "", step[j]))  # v24.11.1 writes one cell "8.7  5"
    r["tokens_per_sec"] = float(re.sub(r"[\s,]+", "", toks[j]))
    r["mfu_published"] = mfu[j] if mfu else ""
    r["source"] = f"NVIDIA/dgxc-benchmarking tag {tag} ({sha[:10]}), {path}"
    implied = r["gbs"] * r["seq_len"] / r["step_time_s"]
    return 1 if abs(implied / r["tokens_per_sec"] - 1) > 0.01 else 0


def combined_rows(repo, tag, sha):
    """Rows of the v25.04-style READMEs: layout tables keyed by (size, precision, GPUs) and
    result tables per size and precision. Returns rows and the number failing the 1 % check."""
    rows, bad = [], 0
    for path, sizes in COMBINED:
        if not has(repo, tag, path):
            continue
        text = show(repo, tag, path)
        launch = show(repo, tag, path.split("/")[0] + "/launch.sh")
        fw = re.search(r"FW_VERSION=(\S+)", launch)
        container = "NeMo " + (fw.group(1) if fw else "unknown")
        layouts = {}
        lines = text.split("\n")
        for i, l in enumerate(lines):
            if not l.startswith("| Size"):
                continue
            head = cells(l)
            for m in lines[i + 2:]:
                if not m.startswith("|"):
                    break
                c = dict(zip(head, cells(m)))
                size = c["Size"].lower()
                precs = ["BF16", "FP8"] if c["Precision"].upper() == "BF16/FP8" else [c["Precision"].upper()]
                for p in precs:
                    layouts[(size, p, int(c["GPUs"]))] = c
        n = 0
        for i, l in enumerate(lines):
            h = re.match(r"^\|?\s*(Llama [\d.]+|Nemotron4) (\d+b) (BF16|FP8)\s*\|", l)
            if not h:
                continue
            size, prec = h.group(2).lower(), h.group(3)
            gpus = [int(g) for g in re.findall(r"(\d+)x H100 GPUs", l)]
            body = {}
            for m in lines[i + 2:]:
                if "|" not in m:
                    break
                c = cells(m)
                body[c[0].lower()] = c[1:]
            step = body.get("training step time (seconds per step)")
            toks = body.get("throughput in tokens per second")
            mfu = body.get("model flops utilization")
            for j, g in enumerate(gpus):
                lay = layouts.get((size, prec, g)) or layouts.get((size + "-proxy", prec, g))
                if lay is None:
                    raise SystemExit(f"{path}: no layout row for {size} {prec} {g} GPUs")
                model, _ = sizes[lay["Size"].lower()]
                na = lambda v: v.strip().upper() in ("NA", "N/A", "")
                r = {"model": model, "container": container, "precision": prec, "num_gpus": g,
                     "mbs": int(lay["MBS"]), "seq_len": int(lay["SeqLen"]), "num_layers": int(lay["Layers"]),
                     "tp": int(lay["TP"]), "pp": int(lay["PP"]), "cp": int(lay["CP"]),
                     "vp": 1 if na(lay["VP"]) else int(lay["VP"]), "ep": 1 if na(lay["EP"]) else int(lay["EP"]),
                     "gbs": int(lay["GBS"])}
                bad += fill_results(r, step, toks, mfu, j, tag, sha, path)
                rows.append(r)
                n += 1
        print(f"{path}: {n} rows, {container}")
        for lay in sorted({(r["model"], r["precision"], r["num_gpus"], r["gbs"], r["tp"], r["pp"], r["cp"], r["vp"],
                            r["ep"], r["mbs"], r["seq_len"], r["num_layers"]) for r in rows if path in r["source"]}):
            print("   model/prec/gpus/gbs/tp/pp/cp/vp/ep/mbs/seq/layers", lay)
    return rows, bad


def main():
    repo, tag, out = sys.argv[1], sys.argv[2], sys.argv[3]
    sha = subprocess.run(["git", "--git-dir", repo, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True,
                         check=True).stdout.strip()
    rows, bad = combined_rows(repo, tag, sha)
    combined = bool(rows)
    for path, model, seq_default, layers_default in FILES:
        if combined:
            # A combined-format tag: only its NeMo 2.0 READMEs are transcribed (the others changed
            # format and recipe too, and stay unread for a declaration of their own).
            if not any(r["model"] == model for r in rows) and has(repo, tag, path):
                print(f"{path}: not transcribed at this tag")
            continue
        text = show(repo, tag, path)
        launch = show(repo, tag, path.split("/")[0] + "/launch.sh")
        fw = re.search(r"FW_VERSION=(\S+)", launch)
        image = re.search(r"nvidia\+nemo\+([A-Za-z0-9.]+)\.sqsh", launch)  # a literal tag (dev) wins
        container = "NeMo " + (image.group(1) if image else fw.group(1) if fw else "unknown")
        lines = text.split("\n")
        grok = {}
        if model == "Grok-1":
            for i, l in enumerate(lines):
                if l.startswith("| GPUs"):
                    head = cells(l)
                    for m in lines[i + 2:]:
                        if not m.startswith("|"):
                            break
                        c = cells(m)
                        grok[int(c[0])] = dict(zip(head, c))
                    break
        n = 0
        for i, l in enumerate(lines):
            if not l.startswith("|") or "H100 GPUs" not in l:
                continue
            head = cells(l)
            prec = "FP8" if "FP8" in head[0] else "BF16"
            lay = layout_of(head[0])
            cols = []
            for c in head[1:]:
                g = re.search(r"(\d+)x? H100", c)
                if not g:
                    continue
                gbs = re.search(r"GBS=(\d+)", c)
                cols.append((int(g.group(1)), int(gbs.group(1)) if gbs else None))
            body = {}
            for m in lines[i + 2:]:
                if not m.startswith("|"):
                    break
                c = cells(m)
                body[c[0].lower()] = c[1:]
            step = body.get("training step time (seconds per step)")
            toks = body.get("throughput in tokens per second")
            mfu = body.get("model flops utilization")
            for j, (gpus, gbs) in enumerate(cols):
                r = {"model": model, "container": container, "precision": prec, "num_gpus": gpus,
                     "mbs": int(lay.get("MBS", 1)), "seq_len": int(lay.get("SEQ", seq_default)),
                     "num_layers": layers_default, "tp": int(lay.get("TP", 1)), "pp": int(lay.get("PP", 1)),
                     "cp": int(lay.get("CP", 1)), "vp": int(lay.get("VP", 1)), "ep": 1, "gbs": gbs}
                if "layers" in body:
                    get = lambda k: body[k][j]
                    r["num_layers"] = int(get("layers"))
                    r["gbs"] = int(get("gbs"))
                    r["pp"] = int(get("pp"))
                    r["vp"] = 1 if get("vp").lower() in ("n/a", "na", "") else int(get("vp"))
                if model == "Grok-1":
                    g = grok[gpus]
                    r.update(seq_len=int(g["SeqLen"]), num_layers=int(g["Layers"]), tp=int(g["TP"]), pp=int(g["PP"]),
                             cp=int(g["CP"]), ep=int(g["EP"]), mbs=int(g["MBS"]), gbs=int(g["GBS"]),
                             vp=1 if g["VP"].upper() in ("NA", "N/A") else int(g["VP"]))
                bad += fill_results(r, step, toks, mfu, j, tag, sha, path)
                rows.append(r)
                n += 1
        layouts = sorted({(r["precision"], r["num_gpus"], r["gbs"], r["tp"], r["pp"], r["cp"], r["vp"], r["ep"],
                           r["mbs"], r["seq_len"], r["num_layers"]) for r in rows if r["model"] == model})
        print(f"{path}: {n} rows, {container}")
        for lay in layouts:
            print("   prec/gpus/gbs/tp/pp/cp/vp/ep/mbs/seq/layers", lay)
    fields = ["source", "model", "container", "precision", "num_gpus", "gbs", "mbs", "seq_len", "num_layers", "tp", "pp",
              "cp", "vp", "ep", "step_time_s", "tokens_per_sec", "mfu_published"]
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in fields})
    print(f"{len(rows)} rows; tokens/s = gbs x seq / step within 1 % on {len(rows) - bad} of {len(rows)}")


if __name__ == "__main__":
    main()
