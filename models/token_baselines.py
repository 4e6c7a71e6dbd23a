#!/usr/bin/python3
"""What simple counting gives on a byte-token split, to judge a model by.

    /usr/bin/python3 models/token_baselines.py DIR [--json]

DIR holds make_tokens.py's train.bin and val.bin (little-endian uint16
ids). Prints, in nats per token, the cross-entropy on val.bin of

  * the token frequencies of train.bin (a unigram model: what a model that
    learned only byte frequencies scores), and
  * the next-token frequencies given the previous token (a bigram model),

both with add-one smoothing over the ids seen in either file, so an id
missing from train.bin costs a finite amount. A language model's validation
loss below the unigram figure has learned more than frequencies; below the
bigram one, more than pairs.
"""

import argparse
import json
import math
import os
import sys

import numpy as np


def load(path):
    if not os.path.exists(path):
        sys.exit("token_baselines: %s: missing (make it with models/make_tokens.py)" % path)
    t = np.fromfile(path, dtype="<u2").astype(np.int64)
    if len(t) < 2:
        sys.exit("token_baselines: %s: fewer than 2 tokens" % path)
    return t


def baselines(train, val):
    v = int(max(train.max(), val.max())) + 1
    uni = np.bincount(train, minlength=v).astype(np.float64) + 1.0
    uni /= uni.sum()
    unigram = float(-np.log(uni[val]).mean())
    pairs = np.bincount(train[:-1] * v + train[1:], minlength=v * v).reshape(v, v)
    pairs = pairs.astype(np.float64) + 1.0
    pairs /= pairs.sum(axis=1, keepdims=True)
    bigram = float(-np.log(pairs[val[:-1], val[1:]]).mean())
    return {"unigram": unigram, "bigram": bigram, "vocab": v,
            "train_tokens": int(len(train)), "val_tokens": int(len(val))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    b = baselines(load(os.path.join(a.dir, "train.bin")), load(os.path.join(a.dir, "val.bin")))
    if a.json:
        print(json.dumps(b))
        return
    print("token_baselines: on val.bin (%d tokens), counting train.bin (%d): byte frequencies "
          "%.3f nats/token (perplexity %.1f), the previous byte %.3f (perplexity %.1f)"
          % (b["val_tokens"], b["train_tokens"], b["unigram"], math.exp(b["unigram"]),
             b["bigram"], math.exp(b["bigram"])))


if __name__ == "__main__":
    main()
