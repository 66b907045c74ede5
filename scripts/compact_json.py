#!/usr/bin/env python3
"""Rewrite measured JSON files without whitespace, keeping their content.

The device tool copies the working tree (tracked files) up to 64 MiB, and lcm-exec's indented
summaries of MoE runs (about 350 KB each, most of it indentation) had taken validation/measured
past that. This rewrites each named file in compact form (no indentation, key order kept) and
checks, before replacing it, that the rewritten text parses to exactly the object the original
parses to (every number the same double, every string and key the same). Files whose parse
differs, or that are not JSON, are left alone and reported; nothing is half-written (temp file,
then rename).

usage: compact_json.py [--min-bytes N] [--check] FILE...
  --min-bytes N  only files of at least N bytes [100000]
  --check        rewrite nothing; report what would be rewritten (exit 1 if a file cannot be)
"""
import argparse
import json
import os
import sys

from jsonio import write_text_atomic


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-bytes", type=int, default=100000)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    saved = 0
    rewritten = 0
    bad = 0
    for path in args.files:
        size = os.path.getsize(path)
        if size < args.min_bytes:
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                original = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"{path}: not JSON ({e}); left alone", file=sys.stderr)
            bad += 1
            continue
        text = json.dumps(original, separators=(",", ":"), ensure_ascii=False) + "\n"
        if json.loads(text) != original:
            print(f"{path}: the compact form parses differently; left alone", file=sys.stderr)
            bad += 1
            continue
        if len(text.encode("utf-8")) >= size:
            continue
        if not args.check:
            write_text_atomic(path, text)
        saved += size - len(text.encode("utf-8"))
        rewritten += 1
    verb = "would rewrite" if args.check else "rewrote"
    print(f"{verb} {rewritten} file(s), {saved / 2**20:.1f} MiB less; {bad} left alone")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
