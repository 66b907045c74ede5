#!/usr/bin/env bash
# Figures quoted in docs/ must come from the current outputs: runs the commands that produce
# them and compares each with the text of the doc, so a stale figure fails CTest
# (`docs_figures`). Checked places:
#   docs/validation-performance.md  the "**all**" row (rows, mean |error|, signed error, within 20 %)
#                                    = PerfValidation's "Overall:" line
#   docs/validation-memory.md        "**N of M rows evaluated: mean |error| X %, worst Y %**"
#                                    = MegatronCiMemory's "evaluated N of M rows; ..." line
#   docs/time-model.md, "Error bands" the composition spread (10th/90th percentile of the
#                                    PerfValidation rows' step residuals) and the memory spread
#                                    (of the MegatronCi rows), recomputed from those outputs
#   docs/validation-performance.md  every table row and summary line PerfValidation prints, verbatim,
#                                    and MegatronCiStepTime's table (CI iteration times)
#   docs/planner.md                  the memory band's two ends (the memory spread)
#   README.md                        the calibrated profile's in-sample / cross-validated shares
#                                    = lcm calibrate's report; the published-table figure
#                                    = PerfValidation's "Overall:" line
#   model/src/uncertainty.cpp        the composition spread in use (lcm estimate's JSON) = the recomputed one
#   docs/validation-memory.md, docs/memory-model.md  the no-false-OOM counts = lcm_no_false_oom_tests' summary
# usage: docs_figures_check.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=${1:?usage: docs_figures_check.sh REPO_ROOT BUILD_DIR}
build=${2:?usage: docs_figures_check.sh REPO_ROOT BUILD_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check DESCRIPTION EXPECTED-TEXT FILE
  if grep -qF -- "$2" "$3"; then echo "ok: $1: $2"; else echo "STALE: $1: '$2' not in $3"; fail=1; fi
}

"$build/bin/lcm_model_tests" --gtest_filter='PerfValidation.*' >"$tmp/perf.txt" 2>&1
"$build/bin/lcm_model_tests" --gtest_filter='MegatronCiMemory.*' >"$tmp/mem.txt" 2>&1
"$build/bin/lcm_model_tests" --gtest_filter='MegatronCiStepTime.*' >"$tmp/ci_step.txt" 2>&1

# Performance: "Overall: 73 rows counted, mean |error| 17.3 %, mean signed error +14.3 % (+: lcm faster), 55 within 20 %"
read -r rows mae signed within < <(sed -n 's/^Overall: \([0-9]*\) rows counted, mean |error| \([0-9.]*\) %, mean signed error \([-+0-9.]*\) % (+: lcm faster), \([0-9]*\) within 20 %.*/\1 \2 \3 \4/p' "$tmp/perf.txt")
if [[ -z ${rows:-} ]]; then echo "no Overall line in PerfValidation's output"; fail=1; else
  check "published-table summary" "| **all** | **$rows** | **$mae %** | **${signed/-/−} %** | **$within** |" "$root/docs/validation-performance.md"
  check "README published-table figure" "the model is within **$mae %** mean |error| ($signed % signed," "$root/README.md"
  check "README published-table rows" "$within rows within 20 %): a **development-set** figure" "$root/README.md"
fi

# The tables of docs/validation-performance.md are the test's output verbatim: every row and
# summary line it prints must be there (a row that changed is stale).
stale_rows=0
while IFS= read -r line; do
  grep -qxF -- "$line" "$root/docs/validation-performance.md" || { echo "STALE: validation-performance.md table line: $line"; stale_rows=1; }
done < <(grep -E '^\| [0-9A-Za-z]|rows counted|^Error bands:|outside its band' "$tmp/perf.txt")
if [[ $stale_rows == 0 ]]; then echo "ok: validation-performance.md tables are PerfValidation's output"; else fail=1; fi
# The CI iteration-time table (MegatronCiStepTime) is in the same doc verbatim.
stale_rows=0
while IFS= read -r line; do
  grep -qxF -- "$line" "$root/docs/validation-performance.md" || { echo "STALE: validation-performance.md CI step line: $line"; stale_rows=1; }
done < <(grep -E '^\| [a-z].* \| tp[0-9]|^Megatron-LM CI iteration times' "$tmp/ci_step.txt")
if grep -q '^Megatron-LM CI iteration times' "$tmp/ci_step.txt" && [[ $stale_rows == 0 ]]; then
  echo "ok: validation-performance.md CI iteration-time table is MegatronCiStepTime's output"; else fail=1; fi

# Memory: "... N of M rows evaluated: mean |error| X %, worst Y % ..." as the test prints it.
python3 - "$tmp/mem.txt" "$tmp/perf.txt" >"$tmp/figures.txt" <<'PY' || fail=1
import re, sys
def q(v, p):
    v = sorted(v); x = p * (len(v) - 1); i = int(x)
    return v[-1] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (x - i)
mem = open(sys.argv[1]).read()
r = []  # "name  pred-GiB  meas-GiB  err-%  stage" rows of the test's table
for m in re.finditer(r'^\S+\s+([0-9.]+)\s+([0-9.]+)\s+[-+0-9.]+\s+[0-9]+\s*$', mem, re.M):
    r.append(float(m.group(2)) / float(m.group(1)) - 1)
print("memory_rows", len(r))
print("memory_p90 %+.2f%%" % (100 * q(r, 0.9)))
print("memory_p10 %+.2f%%" % (100 * q(r, 0.1)))
perf = open(sys.argv[2]).read()
ratios = []
for sec in re.split(r'\n### ', perf)[1:]:
    title = sec.split('\n')[0]
    for l in sec.split('\n'):
        if not l.startswith('| ') or l.startswith('| row') or 'not counted' in l: continue
        c = [x.strip() for x in l.strip().strip('|').split('|')]
        try:
            if title.startswith('MoE'): ratios.append(float(c[8]) / float(c[7]) - 1)
            else: ratios.append(float(c[1]) / float(c[2]) - 1)
        except (ValueError, IndexError): pass
print("composition_rows", len(ratios))
print("composition_p10 %+.2f%%" % (100 * q(ratios, 0.1)))
print("composition_p90 %+.2f%%" % (100 * q(ratios, 0.9)))
PY
get() { sed -n "s/^$1 //p" "$tmp/figures.txt"; }
# "evaluated 44 of 51 rows; mean |error| 4.0%, worst 27.8% (...)" -> "**44 of 51 rows evaluated: mean |error| 4.0 %, worst 27.8 %**"
read -r n m mean worst < <(sed -n 's/^evaluated \([0-9]*\) of \([0-9]*\) rows; mean |error| \([0-9.]*\)%, worst \([0-9.]*\)%.*/\1 \2 \3 \4/p' "$tmp/mem.txt")
if [[ -z ${n:-} ]]; then echo "no summary line in MegatronCiMemory's output"; fail=1; else
  check "memory summary" "**$n of $m rows evaluated (development set): mean |error| $mean %, worst $worst %**" "$root/docs/validation-memory.md"
fi
# The spreads as docs/time-model.md quotes them ("10th percentile -3.30%, 90th +37.74%").
p10=$(get composition_p10); p90=$(get composition_p90)
check "composition spread" "10th percentile ${p10/+/}, 90th $p90" "$root/docs/time-model.md"
check "composition rows" "residuals of the $(get composition_rows) published H100 rows" "$root/docs/time-model.md"
check "memory rows" "over the $(get memory_rows) evaluated Megatron-LM CI rows" "$root/docs/time-model.md"
check "memory spread values" "$(get memory_p10) / $(get memory_p90) (\`memory_spread()\`)" "$root/docs/time-model.md"
# The memory band that decides the planner's verdicts: docs/planner.md quotes both ends.
check "memory p90 in planner.md" "is $(get memory_p90), and" "$root/docs/planner.md"
check "memory p10 in planner.md" "the 10th is $(get memory_p10)." "$root/docs/planner.md"
# README: the calibrated profile's in-sample and cross-validated shares, as lcm calibrate reports
# them ("all classes: 185 of 200 points within 10% after the fit (92.5%, in-sample; 174/200 ...").
(cd "$root" && "$build/bin/lcm" calibrate @validation/measured/h200/calibration_inputs.txt --profile hwprofiles/h200-sxm.yaml \
   -o "$tmp/cal.yaml" --format md --report-out "$tmp/cal.md") 2>/dev/null
read -r a n b < <(sed -n 's/^all classes: \([0-9]*\) of \([0-9]*\) points within 10% after the fit ([0-9.]*%, in-sample; \([0-9]*\)\/.*/\1 \2 \3/p' "$tmp/cal.md")
if [[ -z ${a:-} ]]; then echo "no summary line in lcm calibrate's report"; fail=1; else
  check "README calibration shares" "($a of $n ops within 10% **in-sample**, $b of $n when" "$root/README.md"
fi
# The composition spread lcm uses (lcm estimate's JSON band) = the one recomputed above.
(cd "$root" && "$build/bin/lcm" estimate scenarios/default.yaml --format json) >"$tmp/est.json"
used=$(python3 -c '
import json, math, sys
c = json.load(open(sys.argv[1]))["time"]["band"]["composition"]
m, s = c["log_center"], c["log_half_width"]
print("%+.2f%% %+.2f%%" % (100 * math.expm1(m - s), 100 * math.expm1(m + s)))' "$tmp/est.json")
if [[ $used == "$p10 $p90" ]]; then echo "ok: composition spread in use: $used"; else
  echo "STALE: composition spread in use ($used) is not the current one ($p10 $p90): model/src/uncertainty.cpp"; fail=1
fi
# No false out-of-memory: "90 of 95 published runs fit or are tight (15 tight); 5 flagged" as
# docs/validation-memory.md and docs/memory-model.md quote it.
"$build/bin/lcm_no_false_oom_tests" >"$tmp/oom.txt" 2>&1
read -r kept total tight flagged < <(sed -n 's/^\([0-9]*\) of \([0-9]*\) published runs fit or are tight (\([0-9]*\) tight); \([0-9]*\) flagged.*/\1 \2 \3 \4/p' "$tmp/oom.txt")
if [[ -z ${kept:-} ]]; then echo "no summary line in lcm_no_false_oom_tests' output"; fail=1; else
  verb=are; [ "$flagged" = 1 ] && verb=is
  flagged_words="$flagged $verb flagged" mm_words="the $flagged flagged"
  [ "$flagged" = 0 ] && flagged_words="none is flagged" mm_words="none is flagged"
  check "no-false-OOM summary" "**$kept of $total runs are kept: $((kept - tight)) fit, $tight are tight; $flagged_words**" "$root/docs/validation-memory.md"
  check "no-false-OOM in memory-model.md" "$kept of $total kept, $((kept - tight)) fit and $tight tight; $mm_words" "$root/docs/memory-model.md"
fi
exit $fail
