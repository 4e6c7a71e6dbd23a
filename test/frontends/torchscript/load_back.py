#!/usr/bin/env python3
"""Loads dsrt's trained weights back into the TorchScript module by name.

    load_back.py ARCHIVE.pt WEIGHTS.safetensors X.npy Y.npy

Every tensor of WEIGHTS must be a parameter of the module
(named_parameters(), the names dsc took from the archive) of the same
shape; each is copied in, and the module's own forward then computes the
loss of the batch (X, Y) with the trained weights. Prints
"load_back: N of M parameters loaded by name; loss L" (the parameters not
in WEIGHTS are the frozen ones, which dsrt does not write).
"""
import json
import struct
import sys

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", (name, meta["dtype"])
        lo, hi = meta["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(meta["shape"])
    return out


def main():
    archive, weights, x, y = sys.argv[1:5]
    m = torch.jit.load(archive)
    params = dict(m.named_parameters())
    trained = read_safetensors(weights)
    for name, value in trained.items():
        if name not in params:
            sys.exit("load_back: %s is not a parameter of the module (%s)" %
                     (name, ", ".join(sorted(params))))
        if tuple(params[name].shape) != value.shape:
            sys.exit("load_back: %s has shape %s, the module's %s" %
                     (name, value.shape, tuple(params[name].shape)))
        with torch.no_grad():
            params[name].copy_(torch.from_numpy(value.copy()))
    m.eval()  # the loss of the trained weights, dropout off
    with torch.no_grad():
        loss = m(torch.from_numpy(np.load(x)[:4]), torch.from_numpy(np.load(y)[:4]))
    print("load_back: %d of %d parameters loaded by name; loss %.6f" %
          (len(trained), len(params), float(loss)))


if __name__ == "__main__":
    main()
