#!/usr/bin/python3
"""Writes a tiny ONNX training graph with one bad (or good) property, for
the importer's error tests.

    make_model.py MODE OUTDIR

The model is OUTDIR/model/model.onnx:

    loss = ReduceMean(Reshape(MatMul(x, W), shape))
    x: input float[2, 4]; W: initializer float[4, 4]; shape: int64[1] = {8}

(for the overflow-* modes: loss = ReduceMean(x) + ReduceMean(W)).

External data lives in OUTDIR/model/; OUTDIR/outside.data is a file outside
the model's folder for the modes that try to escape it. MODE:

  valid              W external in model.data at offset 16 (after 16 junk
                     bytes): imports fine
  valid-int64        also the int64 shape external (offset 80), so the
                     importer must read it to fold the Reshape: imports fine
  absolute           W's location is the absolute path of model.data
  dotdot             W's location is ../outside.data
  symlink            W's location is link.data, a symlink to ../outside.data
  missing            W's location is nothere.data, which does not exist
  directory          W's location is sub, a folder
  beyond             W: offset 32, length 64 in a 64-byte file
  offset-overflow    W: offset 2^63-1, length 64
  length             W: length 32, but float[4, 4] needs 64 bytes
  bad-offset         W: offset "-5"
  overflow-external  W: external, dims 4294967296 x 4294967296
  overflow-init      W: inline, dims 4294967296 x 4294967296
"""
import os
import struct
import sys

import onnx
from onnx import TensorProto, helper

W_BYTES = struct.pack("<16f", *[0.25 * k for k in range(16)])
SHAPE_BYTES = struct.pack("<q", 8)


def external(name, dtype, dims, location, offset=None, length=None):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset),
                       ("length", length)):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, str(value)
    return t


def main(mode, outdir):
    folder = os.path.join(outdir, "model")
    os.makedirs(folder, exist_ok=True)
    data = os.path.join(folder, "model.data")
    outside = os.path.join(outdir, "outside.data")
    with open(data, "wb") as f:
        f.write(b"\0" * 16 + W_BYTES + SHAPE_BYTES)
    with open(outside, "wb") as f:
        f.write(W_BYTES)
    os.makedirs(os.path.join(folder, "sub"), exist_ok=True)

    F = TensorProto.FLOAT
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [8])
    W_at = lambda loc, **kw: external("W", F, [4, 4], loc, **kw)
    if mode in ("valid", "valid-int64"):
        W = W_at("model.data", offset=16, length=64)
        if mode == "valid-int64":
            shape = external("shape", TensorProto.INT64, [1], "model.data",
                             offset=80, length=8)
    elif mode == "absolute":
        W = W_at(os.path.abspath(data), offset=16, length=64)
    elif mode == "dotdot":
        W = W_at("../outside.data")
    elif mode == "symlink":
        link = os.path.join(folder, "link.data")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink("../outside.data", link)
        W = W_at("link.data")
    elif mode == "missing":
        W = W_at("nothere.data")
    elif mode == "directory":
        W = W_at("sub")
    elif mode == "beyond":
        with open(data, "wb") as f:
            f.write(W_BYTES)
        W = W_at("model.data", offset=32, length=64)
    elif mode == "offset-overflow":
        W = W_at("model.data", offset=2**63 - 1, length=64)
    elif mode == "length":
        W = W_at("model.data", offset=16, length=32)
    elif mode == "bad-offset":
        W = W_at("model.data", offset=-5)
    elif mode == "overflow-external":
        W = external("W", F, [2**32, 2**32], "model.data")
    elif mode == "overflow-init":
        W = TensorProto(name="W", data_type=F, dims=[2**32, 2**32],
                        raw_data=W_BYTES)
    else:
        sys.exit("unknown mode " + mode)

    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul"),
        helper.make_node("Reshape", ["y", "shape"], ["flat"], name="flatten"),
        helper.make_node("ReduceMean", ["flat"], ["loss"], name="mean",
                         keepdims=0),
    ]
    if mode.startswith("overflow"):
        # W's shape cannot meet x in a MatMul: loss = mean(x) + mean(W).
        nodes = [
            helper.make_node("ReduceMean", ["x"], ["xm"], keepdims=0),
            helper.make_node("ReduceMean", ["W"], ["wm"], keepdims=0),
            helper.make_node("Add", ["xm", "wm"], ["loss"]),
        ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("loss", F, [])], [W, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
