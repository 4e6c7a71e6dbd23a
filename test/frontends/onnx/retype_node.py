#!/usr/bin/env python3
"""Writes a copy of an ONNX model whose node producing OUTPUT has OP_TYPE
instead, keeping every field (metadata too): for error-message tests.

    retype_node.py SRC OUT OUTPUT OP_TYPE
"""
import sys

import onnx


def main():
    src, out, output, op_type = sys.argv[1:5]
    model = onnx.load(src)
    for node in model.graph.node:
        if output in node.output:
            node.op_type = op_type
            del node.input[1:]
            del node.attribute[:]
            break
    else:
        sys.exit("retype_node.py: no node gives " + output)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
