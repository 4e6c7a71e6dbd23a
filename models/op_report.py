#!/usr/bin/python3
"""Print a summary of an ONNX model: opset imports, graph inputs/outputs,
op-type histogram, notable attributes and initializers.

Usage: op_report.py FILE.onnx [--no-attrs] [--no-inits]
Needs only the onnx package (external data is not loaded).
"""

import argparse
import collections
import sys


def _shape(vi):
    import onnx
    t = vi.type.tensor_type
    dt = onnx.TensorProto.DataType.Name(t.elem_type).lower()
    if not t.HasField("shape"):
        return "%s[?]" % dt
    dims = []
    for d in t.shape.dim:
        dims.append(str(d.dim_value) if d.HasField("dim_value")
                    else (d.dim_param or "?"))
    return "%s[%s]" % (dt, ",".join(dims))


def _attr(a):
    import onnx
    import onnx.numpy_helper
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode()
    elif isinstance(v, onnx.TensorProto):
        arr = onnx.numpy_helper.to_array(v)
        v = ("%s%s" % (arr.dtype, list(arr.shape)) if arr.size > 8
             else "%s %s" % (arr.dtype, arr.tolist()))
    return "%s=%s" % (a.name, v)


# Ops whose attributes / inputs are worth printing once per distinct signature.
NOTABLE = {"SoftmaxCrossEntropyLoss", "Dropout", "LayerNormalization", "Gemm",
           "Softmax", "Where", "Cast", "Split", "Transpose", "Range", "Slice",
           "Reshape", "ConstantOfShape", "Not", "Equal", "Concat", "Gather",
           "Unsqueeze", "ReduceMean", "Pow", "Tanh", "Erf"}


def report(path, show_attrs=True, show_inits=True, out=sys.stdout):
    import onnx
    m = onnx.load_model(path, load_external_data=False)
    g = m.graph
    w = lambda s="": print(s, file=out)  # noqa: E731

    w("file: %s  (ir_version %d, producer %s %s)" % (
        path, m.ir_version, m.producer_name, m.producer_version))
    w("opset_import: " + ", ".join(
        "%s:%d" % (o.domain or "ai.onnx", o.version) for o in m.opset_import))
    domains = sorted({n.domain for n in g.node if n.domain not in ("", "ai.onnx")})
    w("non-default node domains: %s" % (", ".join(domains) or "none"))

    init_names = {i.name for i in g.initializer}
    init_desc = {i.name: "%s%s" % (onnx.TensorProto.DataType.Name(i.data_type).lower(),
                                   list(i.dims)) for i in g.initializer}
    w("inputs:")
    for vi in g.input:
        if vi.name not in init_names:
            w("  %-20s %s" % (vi.name, _shape(vi)))
    w("outputs:")
    for vi in g.output:
        w("  %-20s %s" % (vi.name, _shape(vi)))

    hist = collections.Counter(
        (n.domain + "::" if n.domain else "") + n.op_type for n in g.node)
    w("ops (%d nodes, %d types):" % (len(g.node), len(hist)))
    for op, c in sorted(hist.items()):
        w("  %-26s %d" % (op, c))

    if show_attrs:
        consts = {}
        for n in g.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    consts[n.output[0]] = _attr(a).split("=", 1)[1]
        seen = collections.Counter()
        for n in g.node:
            if n.op_type not in NOTABLE:
                continue
            ins = []
            for i in n.input:
                if i == "":
                    ins.append("<none>")
                elif i in consts:
                    ins.append("const " + consts[i])
                elif i in init_names:
                    ins.append("init " + init_desc[i])
                else:
                    ins.append("%")
            sig = "%s(%s) {%s} outs=%d" % (
                n.op_type, ", ".join(ins),
                ", ".join(_attr(a) for a in n.attribute), len(n.output))
            seen[sig] += 1
        if seen:
            w("notable node signatures (%=computed value):")
            for sig, c in sorted(seen.items()):
                w("  %3dx %s" % (c, sig))

    if show_inits:
        total = 0
        w("initializers (%d):" % len(g.initializer))
        for i in g.initializer:
            dt = onnx.TensorProto.DataType.Name(i.data_type).lower()
            n = 1
            for d in i.dims:
                n *= d
            total += n
            loc = " (external)" if i.data_location == onnx.TensorProto.EXTERNAL else ""
            w("  %-44s %s%s%s" % (i.name, dt, list(i.dims), loc))
        w("  total elements: %d" % total)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--no-attrs", action="store_true")
    p.add_argument("--no-inits", action="store_true")
    a = p.parse_args(argv)
    report(a.file, not a.no_attrs, not a.no_inits)


if __name__ == "__main__":
    main()
