"""nan_weight.py IN.onnxtxt OUT.onnx NAME: the textual model as a binary
ONNX file with element 2 of initializer NAME set to NaN (textual ONNX has
no NaN literal)."""
import math
import sys

import onnx
import onnx.numpy_helper
import onnx.parser

src, out, name = sys.argv[1:4]
with open(src) as f:
    model = onnx.parser.parse_model(f.read())
for i, init in enumerate(model.graph.initializer):
    if init.name == name:
        values = onnx.numpy_helper.to_array(init).copy()
        values.flat[2] = math.nan
        model.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(values, name))
onnx.save(model, out)
