#!/usr/bin/env python3
"""Edits a dsrt checkpoint tag the way an accident or a careless hand would
(standard library only), for checkpoint-validation.test:

    ckpt_edit.py set TAG FILE KEY INDEX VALUE   one float32 of a rank file's tensor
    ckpt_edit.py rehash TAG                     index.json's sha256 of every rank file
    ckpt_edit.py index TAG PYTHON-EXPR          rewrites index.json's text: the
                                                expression maps `text` to the new text
"""
import hashlib
import json
import os
import struct
import sys


def set_value(tag, file, key, index, value):
    path = os.path.join(tag, file)
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        begin = header[key]["data_offsets"][0]
        f.seek(8 + n + begin + 4 * int(index))
        f.write(struct.pack("<f", float(value)))


def rehash(tag):
    path = os.path.join(tag, "index.json")
    index = json.load(open(path))
    for name in index["files"]:
        index["files"][name]["sha256"] = hashlib.sha256(
            open(os.path.join(tag, name), "rb").read()).hexdigest()
    open(path, "w").write(json.dumps(index, indent=1))


def edit_index(tag, expr):
    path = os.path.join(tag, "index.json")
    text = open(path).read()
    open(path, "w").write(eval(expr, {"text": text, "json": json}))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"set": set_value, "rehash": rehash, "index": edit_index}[cmd](*args)
