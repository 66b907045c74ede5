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
ls -1 "$root"/docs/gui/*.png
