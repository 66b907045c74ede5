#!/usr/bin/env bash
# The layer order of model/ (the comment block at the top of model/include/lcm/model/ops.hpp):
# every header and source of a layer includes only lcm/model headers of its own layer or
# below. Fails naming each include that goes up, and each header the table does not place.
# usage: layering_check.sh REPO_ROOT
set -uo pipefail
root=${1:?usage: layering_check.sh REPO_ROOT}
inc=$root/model/include/lcm/model
declare -A layer
# "//   5  comm.hpp     schedule.hpp ..." -> layer[comm]=5, layer[schedule]=5
while read -r n rest; do
  for w in $rest; do
    [[ $w == *.hpp ]] && layer[${w%.hpp}]=$n
  done
done < <(sed -n 's|^//  *\([0-9]\)  *\(.*\)$|\1 \2|p' "$inc/ops.hpp")
fail=0
for h in "$inc"/*.hpp; do
  name=$(basename "$h" .hpp)
  if [[ -z ${layer[$name]:-} ]]; then echo "$h: not placed in the layer table of ops.hpp"; fail=1; continue; fi
  for f in "$h" "$root/model/src/$name.cpp" ${name:+$( [[ $name == schedule ]] && echo "$root/model/src/schedule_gen.hpp")}; do
    [[ -f $f ]] || continue
    while IFS=: read -r line dep; do
      d=${dep#lcm/model/}; d=${d%.hpp}
      [[ $d == io/* ]] && { echo "$f:$line: includes $dep (io/ sits above the model)"; fail=1; continue; }
      if [[ -z ${layer[$d]:-} ]]; then echo "$f:$line: includes $dep, not in the layer table"; fail=1; continue; fi
      if (( layer[$d] > layer[$name] )); then
        echo "$f:$line: $name (layer ${layer[$name]}) includes $dep (layer ${layer[$d]})"; fail=1
      fi
    done < <(grep -n '#include "lcm/model/' "$f" | sed 's|^\([0-9]*\):#include "\([^"]*\)".*|\1:\2|')
  done
done
exit $fail
