#!/usr/bin/python3
"""Checks a model written by dsrt --export-onnx against its source.

    check_export.py SOURCE.onnx EXPORTED.onnx RUN/weights.safetensors

* ONNX's full checker (with shape inference) accepts the exported model;
* its graph (nodes, inputs, outputs, opsets) is the source's, unchanged;
* every tensor of the run's safetensors is an initializer of the export with
  exactly those values (bit for bit, float32); every other initializer has
  the source's value;
* PyTorch loads it: the model rebuilt from the source's export sidecar
  receives every parameter from the exported initializers.
Prints one summary line; exits 1 with the reason otherwise.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_train as rt  # noqa: E402


def fail(msg):
    print("check_export: FAIL: " + msg)
    sys.exit(1)


def read_safetensors(path):
    import json
    import struct
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            fail("%s: tensor %s is %s, not F32" % (path, name, t["dtype"]))
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(body[b:e], dtype="<f4").reshape(t["shape"])
    return out


def main():
    source_path, exported_path, weights_path = sys.argv[1:4]
    source = onnx.load(source_path)
    exported = onnx.load(exported_path)
    onnx.checker.check_model(exported, full_check=True)

    def graph_without_initializers(m):
        g = onnx.GraphProto()
        g.CopyFrom(m.graph)
        del g.initializer[:]
        return g.SerializeToString()

    if graph_without_initializers(source) != graph_without_initializers(exported):
        fail("the exported graph differs from the source's")
    if list(source.opset_import) != list(exported.opset_import):
        fail("the opsets differ")

    trained = read_safetensors(weights_path)
    src_inits = {t.name: numpy_helper.to_array(t) for t in source.graph.initializer}
    exp_inits = {t.name: numpy_helper.to_array(t) for t in exported.graph.initializer}
    if sorted(src_inits) != sorted(exp_inits):
        fail("initializer names differ")
    changed = 0
    for name, value in exp_inits.items():
        if name in trained:
            if value.dtype != np.float32 or value.shape != trained[name].shape:
                fail("%s: %s %s, the run's weight is float32 %s"
                     % (name, value.dtype, value.shape, trained[name].shape))
            if value.tobytes() != trained[name].tobytes():
                fail("%s: values differ from the run's weights" % name)
            changed += not np.array_equal(value, src_inits[name])
        elif not np.array_equal(value, src_inits[name]):
            fail("%s: not trained, yet its value changed" % name)
    missing = set(trained) - set(exp_inits)
    if missing:
        fail("run weights not in the export: %s" % sorted(missing))

    _, mod, margs = rt.load_model_args(source_path, None, None)
    model = mod.build_model(margs)
    params = rt.load_initializers(model, exp_inits)
    print("check_export: OK: %d initializers, %d trained (%d changed by training), "
          "%d torch parameters loaded" % (len(exp_inits), len(trained), changed, len(params)))


if __name__ == "__main__":
    main()
