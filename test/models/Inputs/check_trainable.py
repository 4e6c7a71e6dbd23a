#!/usr/bin/python3
"""Checks an export's dsc.trainable metadata against the model it came from.

    check_trainable.py MODEL.onnx COUNT

Rebuilds the model from the export's sidecar (MODEL.onnx.json) with its
--freeze patterns, and checks that the metadata names exactly the exported
initializers whose tensors have requires_grad (COUNT of them), and that every
other float initializer is a frozen parameter or a buffer.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "models"))

import argparse  # noqa: E402
import importlib  # noqa: E402

import export_common as ec  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402

path, count = sys.argv[1], int(sys.argv[2])
with open(ec.sidecar_path(path)) as f:
    side = json.load(f)
args = argparse.Namespace(**side["args"])
torch.manual_seed(args.seed)
model = importlib.import_module(side["model"]).build_model(args)
ec.apply_freeze(model, args.freeze)
m = onnx.load(path)
meta = [e.value for e in m.metadata_props if e.key == ec.TRAINABLE_KEY]
assert len(meta) == 1, "expected one %s entry, got %d" % (ec.TRAINABLE_KEY, len(meta))
listed = json.loads(meta[0])
sd = model.state_dict(keep_vars=True)
floats = [t.name for t in m.graph.initializer
          if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                             onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)]
want = [n for n in floats if isinstance(sd[n], torch.nn.Parameter) and sd[n].requires_grad]
assert listed == want, "metadata %s != requires_grad %s" % (listed, want)
assert len(listed) == count, "%d trainable, expected %d" % (len(listed), count)
print("check_trainable: %s: %d of %d float initializers train" % (path, len(listed), len(floats)))
