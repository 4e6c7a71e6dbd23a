#!/usr/bin/python3
"""Writes a binary ONNX model from a textual one with metadata_props added
(ONNX's textual syntax cannot hold a JSON list: its strings have no escapes).

    with_metadata.py IN.onnxtxt OUT.onnx KEY=VALUE...

A VALUE of @FILE is that file's contents (values longer than a command line
argument may be).
"""
import sys

import onnx
import onnx.parser

src, dst, *pairs = sys.argv[1:]
with open(src) as f:
    text = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("#"))
model = onnx.parser.parse_model(text)
for pair in pairs:
    key, value = pair.split("=", 1)
    if value.startswith("@"):
        with open(value[1:]) as f:
            value = f.read()
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value
onnx.save_model(model, dst)
