"""Result files of the scripts here, written whole or not at all: a temp file beside the target,
then a rename, so a script that dies mid-write leaves no half-written result (imported by the
probes and converters in this folder; Python puts a script's own folder on sys.path)."""
import json
import os


def write_text_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_json_atomic(path, obj, indent=1):
    write_text_atomic(path, json.dumps(obj, indent=indent))
