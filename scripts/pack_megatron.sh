#!/usr/bin/env bash
# Packs what scripts/device_run_*megatron*.sh and device_run_moe_presync.sh run of Megatron-LM
# (the megatron package, pretrain_gpt.py and its two helpers) from a Megatron-LM git directory
# at COMMIT into .megatron/src.tar.xz, with .megatron/COMMIT. The repository's tracked files
# leave little of the device tool's 64 MiB carry, and the unpacked tree is 13 MB: the packed
# one is about 2 MB. The device scripts unpack it when .megatron/pretrain_gpt.py is missing.
# Megatron-LM is fetched, never committed (.megatron/ is ignored).
# Usage (repository root): bash scripts/pack_megatron.sh MEGATRON_GIT_DIR COMMIT
set -euo pipefail
git_dir=${1:?usage: pack_megatron.sh MEGATRON_GIT_DIR COMMIT}
commit=${2:?usage: pack_megatron.sh MEGATRON_GIT_DIR COMMIT}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$git_dir" archive "$commit" megatron pretrain_gpt.py gpt_builders.py model_provider.py | tar -x -C "$tmp"
git -C "$git_dir" rev-parse "$commit^{commit}" > "$tmp/COMMIT"
mkdir -p "$root/.megatron"
tar -C "$tmp" -cJf "$root/.megatron/src.tar.xz.tmp" .
mv "$root/.megatron/src.tar.xz.tmp" "$root/.megatron/src.tar.xz"
cp "$tmp/COMMIT" "$root/.megatron/COMMIT"
echo "wrote .megatron/src.tar.xz ($(du -h "$root/.megatron/src.tar.xz" | cut -f1)), Megatron-LM $(cat "$tmp/COMMIT")"
