#!/usr/bin/env bash
# Renders one screenshot per lcm-gui tab offscreen into docs/gui/*.png (no display needed).
#   bash scripts/gui_screenshots.sh [BUILD_DIR] [SCENARIO]
# BUILD_DIR defaults to build/, SCENARIO to scenarios/default.yaml. Needs lcm-gui built
# (Qt6 found at configure time).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
scenario="${2:-$root/scenarios/default.yaml}"
gui="$build/bin/lcm-gui"
if [ ! -x "$gui" ]; then
  echo "gui_screenshots: $gui not found (configure with Qt6 installed and build lcm-gui)" >&2
  exit 2
fi
QT_QPA_PLATFORM=offscreen "$gui" "$scenario" --screenshot "$root/docs/gui" --size 1600x1000
# The Validation tab against the calibrated H200 profile (what `lcm calibrate` fitted), when
# the scenario runs on the shipped H200 one: render again with that profile, keep validation.png.
if grep -q "profile: h200-sxm$" "$scenario" && [ -f "$root/hwprofiles/h200-sxm.calibrated.yaml" ]; then
  tmp=$(mktemp -d)
  sed 's/profile: h200-sxm$/profile: h200-sxm.calibrated/' "$scenario" > "$tmp/$(basename "$scenario")"
  QT_QPA_PLATFORM=offscreen "$gui" "$tmp/$(basename "$scenario")" --screenshot "$tmp" --size 1600x1000 >/dev/null
  cp "$tmp/validation.png" "$root/docs/gui/validation.png"
  rm -rf "$tmp"
fi
ls -1 "$root"/docs/gui/*.png
