#!/usr/bin/env python3
"""Checks a dsrt checkpoint against docs/checkpoints.md.

    check_checkpoint.py SAVE_DIR_OR_TAG

Reads the tag `latest` names (or the tag folder given), its index.json and
every rank file (with compare.py's safetensors reader, which checks the
format's rules), and checks that each tensor's pieces exist with their
element counts and tile the tensor's elements exactly (no gap; pieces of a
tensor held by several pipeline stages may repeat with equal values).
Prints one summary line; exits 1 naming the first problem.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import read_safetensors  # noqa: E402


def fail(msg):
    print("check_checkpoint: FAIL: " + msg)
    sys.exit(1)


def main():
    import numpy as np
    path = sys.argv[1]
    if not os.path.exists(os.path.join(path, "index.json")):
        tag = open(os.path.join(path, "latest")).read().strip()
        path = os.path.join(path, tag)
    index = json.load(open(os.path.join(path, "index.json")))
    if index.get("format") != "dsc-checkpoint" or index.get("version") != 1:
        fail("not a version-1 dsc checkpoint index")
    files = {}
    kinds = {}
    for name, t in index["tensors"].items():
        numel = int(np.prod(t["shape"])) if t["shape"] else 1
        whole = np.full(numel, np.nan, dtype=np.float32)
        for p in sorted(t["pieces"], key=lambda p: p["start"]):
            f = p["file"]
            if f not in files:
                files[f] = read_safetensors(os.path.join(path, f))
            if p["key"] not in files[f]:
                fail("%s: no '%s' in %s" % (name, p["key"], f))
            data = files[f][p["key"]].reshape(-1)
            if data.size != p["count"]:
                fail("%s: piece %s has %d elements, the index says %d" % (name, p["key"], data.size, p["count"]))
            seg = whole[p["start"]:p["start"] + p["count"]]
            seen = ~np.isnan(seg)
            if seen.any() and not np.array_equal(seg[seen], data[seen]):
                fail("%s: overlapping pieces differ" % name)
            whole[p["start"]:p["start"] + p["count"]] = data
        if np.isnan(whole).any():
            fail("%s: elements %d.. are in no piece" % (name, int(np.argmax(np.isnan(whole)))))
        kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
    ranks = len([f for f in os.listdir(path) if f.startswith("rank-") and f.endswith(".safetensors")])
    print("check_checkpoint: %s: %d tensors (%d params, %d optimizer states), every tensor tiled by its pieces, %d rank files"
          % (os.path.basename(os.path.normpath(path)), len(index["tensors"]), kinds.get("param", 0),
             kinds.get("opt_state", 0), ranks))


if __name__ == "__main__":
    main()
