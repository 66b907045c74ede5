#!/usr/bin/env python3
"""Re-predicts every committed `lcm-exec train` run with the current model and compares profiles.

  rescore_train_suites.py [--lcm build/bin/lcm] [--gpu h200|h100] PROFILE [PROFILE ...]

For each run under validation/measured/GPU/train_suite*/runs/ (GPU: h200, the default, or
h100; summary.json: the scenario it ran and its overrides), runs `lcm compare SCENARIO RUN --profile P --format json` for every
PROFILE (a name under hwprofiles/ or a path) and prints, per suite and over all runs, the
median and worst |step error| and the mean signed error (error = predicted / measured - 1).
These runs were each scored once when first predicted (their READMEs hold those held-out
figures); scored again here they are a development set.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def step_error(lcm: str, scenario: str, run: Path, profile: str) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([lcm, "compare", scenario, str(run), "--profile", profile, "--format", "json", "-o", out.name],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.load(open(out.name))["step"]["error"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lcm", default=str(ROOT / "build/bin/lcm"))
    ap.add_argument("--gpu", choices=["h200", "h100"], default="h200", help="whose committed suites to re-predict")
    ap.add_argument("profiles", nargs="+")
    a = ap.parse_args()
    errors = defaultdict(lambda: defaultdict(list))  # profile -> suite -> [error]
    runs = sorted(p.parent for p in ROOT.glob(f"validation/measured/{a.gpu}/train_suite*/runs/*/summary.json"))
    if not runs:
        print("no train-suite runs found", file=sys.stderr)
        return 1
    for run in runs:
        scenario = json.load(open(run / "summary.json"))["scenario"]["path"]
        scenario = str(Path(scenario).relative_to(Path(scenario).parents[1]))  # scenarios/NAME.yaml
        suite = run.parents[1].name
        for p in a.profiles:
            errors[p][suite].append(step_error(a.lcm, scenario, run, p))
    print("| profile | suite | runs | median \\|error\\| | worst \\|error\\| | mean signed |")
    print("|---|---|---:|---:|---:|---:|")
    for p in a.profiles:
        every = []
        for suite in sorted(errors[p]):
            e = errors[p][suite]
            every += e
            print(f"| {p} | {suite} | {len(e)} | {100 * statistics.median(map(abs, e)):.1f} % | "
                  f"{100 * max(map(abs, e)):.1f} % | {100 * statistics.mean(e):+.1f} % |")
        print(f"| {p} | all | {len(every)} | {100 * statistics.median(map(abs, every)):.1f} % | "
              f"{100 * max(map(abs, every)):.1f} % | {100 * statistics.mean(every):+.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
