#!/usr/bin/env python3
"""Checks that two dsrt checkpoints hold bitwise the same training state.

    same_state.py SAVE_DIR_A SAVE_DIR_B [--nonzero SUBSTRING]

Reads the tag `latest` names in each (or the tag folder given) and every
rank file (compare.py's safetensors reader), and compares each rank's
tensors bitwise: the same names, the same bytes. With --nonzero, every
tensor whose name contains SUBSTRING must also be nonzero somewhere (so
that "unchanged" is not the trivial "still zero"). Prints one line; exits 1
naming the first difference.
"""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import read_safetensors  # noqa: E402


def fail(msg):
    print("same_state: FAIL: " + msg)
    sys.exit(1)


def tag_dir(path):
    if os.path.exists(os.path.join(path, "index.json")):
        return path
    return os.path.join(path, open(os.path.join(path, "latest")).read().strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--nonzero", metavar="SUBSTRING")
    args = ap.parse_args()
    a, b = tag_dir(args.a), tag_dir(args.b)
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(a, "rank-*.safetensors")))
    other = sorted(os.path.basename(f) for f in glob.glob(os.path.join(b, "rank-*.safetensors")))
    if not files or files != other:
        fail("rank files differ: %s vs %s" % (files, other))
    tensors = nonzero = 0
    for f in files:
        ta, tb = read_safetensors(os.path.join(a, f)), read_safetensors(os.path.join(b, f))
        if sorted(ta) != sorted(tb):
            fail("%s: tensor names differ: %s" % (f, sorted(set(ta) ^ set(tb))))
        for name, x in ta.items():
            y = tb[name]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                fail("%s: %s differs" % (f, name))
            tensors += 1
            if args.nonzero and args.nonzero in name:
                if not x.any():
                    fail("%s: %s is all zeros" % (f, name))
                nonzero += 1
    if args.nonzero and not nonzero:
        fail("no tensor named like %r" % args.nonzero)
    steps = [json.load(open(os.path.join(d, "index.json")))["step"] for d in (a, b)]
    print("same_state: OK: steps %d and %d hold the same %d tensors on %d ranks%s"
          % (steps[0], steps[1], tensors, len(files),
             ", %d named like %r nonzero" % (nonzero, args.nonzero) if args.nonzero else ""))


if __name__ == "__main__":
    main()
