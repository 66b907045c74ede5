#!/usr/bin/env bash
# install_test.sh BUILD_DIR: `cmake --install` into a temporary prefix and run the installed
# lcm away from the source tree: it must find its bundled scenarios and profiles in
# <prefix>/share/lcm, honour $LCM_DATA_DIR, and never fall back to the source tree.
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cd "$tmp"
unset LCM_DATA_DIR
fail() { echo "install_test: $*" >&2; exit 1; }

# 1. A bundled scenario by name, its profile by name, from an unrelated directory.
"$tmp/prefix/bin/lcm" estimate default --format json >est.json || fail "installed lcm estimate default failed"
grep -q '"schema_version"' est.json || fail "no estimate JSON"
"$tmp/prefix/bin/lcm" estimate "$tmp/prefix/share/lcm/scenarios/llama3.1-8b.yaml" >/dev/null ||
  fail "installed scenario by path failed"

# 2. $LCM_DATA_DIR comes first: a scenario and a profile only it has.
mkdir -p data/scenarios data/hwprofiles
sed 's/^name: .*/name: from-env/' "$tmp/prefix/share/lcm/scenarios/default.yaml" |
  sed 's/profile: h200-sxm.calibrated$/profile: env-h200/' >data/scenarios/mine.yaml
sed 's/^name: .*/name: env-h200/' "$tmp/prefix/share/lcm/hwprofiles/h200-sxm.calibrated.yaml" >data/hwprofiles/env-h200.yaml
LCM_DATA_DIR="$tmp/data" "$tmp/prefix/bin/lcm" estimate mine --format json >env.json ||
  fail "LCM_DATA_DIR scenario failed"
grep -q '"from-env"' env.json || fail "LCM_DATA_DIR scenario not used"

# 3. Without share/lcm the installed binary must not find the source tree's data.
mv "$tmp/prefix/share/lcm" "$tmp/prefix/share/lcm.hidden"
if "$tmp/prefix/bin/lcm" estimate default >out.txt 2>err.txt; then fail "found data without share/lcm"; fi
grep -q "no bundled scenario" err.txt || fail "unexpected message: $(cat err.txt)"
grep -q "$tmp/prefix/share/lcm/scenarios" err.txt || fail "message does not name the searched directory: $(cat err.txt)"
echo "install_test: ok"
