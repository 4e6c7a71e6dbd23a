#!/usr/bin/env python3
"""Writes a GPT as torch.export.save would (a .pt2 archive), without PyTorch 2.

    make_pt2_gpt.py OUT.pt2 [--layers 12 --d 768 --heads 12 --vocab 50257 --seq 1024 --batch 1]

This machine's PyTorch (1.13) has no torch.export, so the benchmark of the
.pt2 import writes the program itself, in torch.export's serialization
schema (models/model.json: ATen calls with named arguments, tensor types,
the signature; raw float32 weights under data/weights/), with the
architecture of ../shared/pytorch-2.11's GPT (the ATen calls PyTorch 2.11
recorded for it, block for block) at the size asked for. Weights are drawn
from N(0, 0.02) with a fixed seed. Standard library and NumPy only.
"""
import argparse
import json
import math
import zipfile

import numpy as np


class Program:
    def __init__(self):
        self.nodes, self.values, self.count = [], {}, {}

    def value(self, base, sizes, dtype=7):
        n = self.count.get(base, 0)
        self.count[base] = n + 1
        name = base if n == 0 else "%s_%d" % (base, n)
        self.values[name] = {"dtype": dtype, "sizes": [{"as_int": s} for s in sizes],
                             "requires_grad": False}
        return name

    def call(self, target, args, base, sizes, dtype=7, outputs=None):
        """One ATen call; args are (name, json arg) pairs."""
        if outputs is None:
            out = self.value(base, sizes, dtype)
            results = [{"as_tensor": {"name": out}}]
        else:
            out = [self.value(base, s, dtype) for s in outputs]
            results = [{"as_tensors": [{"name": o} for o in out]}]
        self.nodes.append({"target": "torch.ops.aten." + target,
                           "inputs": [{"name": n, "arg": a, "kind": 1} for n, a in args],
                           "outputs": results, "name": base, "metadata": {}})
        return out


def T(name):
    return {"as_tensor": {"name": name}}


def I(v):
    return {"as_int": v}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    B, Tn, d, h, V, L = a.batch, a.seq, a.d, a.heads, a.vocab, a.layers
    dh = d // h
    p = Program()
    params = []  # (fqn, shape)

    def param(fqn, shape):
        ph = "p_" + fqn.replace(".", "_")
        p.values[ph] = {"dtype": 7, "sizes": [{"as_int": s} for s in shape], "requires_grad": True}
        params.append((fqn, ph, shape))
        return ph

    wte = param("wte.weight", [V, d])
    wpe = param("wpe.weight", [Tn, d])
    blocks = []
    for i in range(L):
        pre = "blocks.%d." % i
        blocks.append({k: param(pre + k.replace("_", "."), s) for k, s in (
            ("ln1_weight", [d]), ("ln1_bias", [d]), ("qkv_weight", [3 * d, d]), ("qkv_bias", [3 * d]),
            ("proj_weight", [d, d]), ("proj_bias", [d]), ("ln2_weight", [d]), ("ln2_bias", [d]),
            ("fc_weight", [4 * d, d]), ("fc_bias", [4 * d]), ("out_weight", [d, 4 * d]),
            ("out_bias", [d]))})
    lnf_w, lnf_b = param("lnf.weight", [d]), param("lnf.bias", [d])
    p.values["b_mask"] = {"dtype": 12, "sizes": [I(Tn), I(Tn)], "requires_grad": False}
    for x in ("idx", "tgt"):
        p.values[x] = {"dtype": 5, "sizes": [I(B), I(Tn)], "requires_grad": False}

    emb = p.call("embedding.default", [("weight", T(wte)), ("indices", T("idx"))], "embedding", [B, Tn, d])
    pos = p.call("arange.default", [("end", I(Tn)), ("pin_memory", {"as_bool": False})], "arange", [Tn], dtype=5)
    emb1 = p.call("embedding.default", [("weight", T(wpe)), ("indices", T(pos))], "embedding", [Tn, d])
    x = p.call("add.Tensor", [("self", T(emb)), ("other", T(emb1))], "add", [B, Tn, d])

    def ln(x, w, b):
        return p.call("layer_norm.default", [("input", T(x)), ("normalized_shape", {"as_ints": [d]}),
                                             ("weight", T(w)), ("bias", T(b)), ("eps", {"as_float": 1e-5}),
                                             ("cudnn_enable", {"as_bool": False})], "layer_norm", [B, Tn, d])

    def linear(x, w, b, n):
        return p.call("linear.default", [("input", T(x)), ("weight", T(w)), ("bias", T(b))],
                      "linear", [B, Tn, n])

    for blk in blocks:
        qkv = linear(ln(x, blk["ln1_weight"], blk["ln1_bias"]), blk["qkv_weight"], blk["qkv_bias"], 3 * d)
        q, k, v = p.call("split.Tensor", [("self", T(qkv)), ("split_size", I(d)), ("dim", I(2))],
                         "split", None, outputs=[[B, Tn, d]] * 3)
        heads = []
        for t in (q, k, v):
            t = p.call("view.default", [("self", T(t)), ("size", {"as_ints": [B, Tn, h, dh]})], "view", [B, Tn, h, dh])
            heads.append(p.call("transpose.int", [("self", T(t)), ("dim0", I(1)), ("dim1", I(2))],
                                "transpose", [B, h, Tn, dh]))
        kt = p.call("transpose.int", [("self", T(heads[1])), ("dim0", I(-2)), ("dim1", I(-1))],
                    "transpose", [B, h, dh, Tn])
        att = p.call("matmul.default", [("self", T(heads[0])), ("other", T(kt))], "matmul", [B, h, Tn, Tn])
        att = p.call("div.Tensor", [("self", T(att)), ("other", {"as_float": math.sqrt(dh)})], "div", [B, h, Tn, Tn])
        keep = p.call("bitwise_not.default", [("self", T("b_mask"))], "bitwise_not", [Tn, Tn], dtype=12)
        att = p.call("masked_fill.Scalar", [("self", T(att)), ("mask", T(keep)), ("value", {"as_float": "-Infinity"})],
                     "masked_fill", [B, h, Tn, Tn])
        att = p.call("softmax.int", [("self", T(att)), ("dim", I(-1))], "softmax", [B, h, Tn, Tn])
        y = p.call("matmul.default", [("self", T(att)), ("other", T(heads[2]))], "matmul", [B, h, Tn, dh])
        y = p.call("transpose.int", [("self", T(y)), ("dim0", I(1)), ("dim1", I(2))], "transpose", [B, Tn, h, dh])
        y = p.call("reshape.default", [("self", T(y)), ("shape", {"as_ints": [B, Tn, d]})], "reshape", [B, Tn, d])
        x = p.call("add.Tensor", [("self", T(x)), ("other", T(linear(y, blk["proj_weight"], blk["proj_bias"], d)))],
                   "add", [B, Tn, d])
        f = linear(ln(x, blk["ln2_weight"], blk["ln2_bias"]), blk["fc_weight"], blk["fc_bias"], 4 * d)
        f = p.call("gelu.default", [("self", T(f))], "gelu", [B, Tn, 4 * d])
        x = p.call("add.Tensor", [("self", T(x)), ("other", T(linear(f, blk["out_weight"], blk["out_bias"], d)))],
                   "add", [B, Tn, d])
    x = ln(x, lnf_w, lnf_b)
    head = p.call("t.default", [("self", T(wte))], "t", [d, V])
    logits = p.call("matmul.default", [("self", T(x)), ("other", T(head))], "matmul", [B, Tn, V])
    logits = p.call("reshape.default", [("self", T(logits)), ("shape", {"as_ints": [-1, V]})], "reshape", [B * Tn, V])
    labels = p.call("reshape.default", [("self", T("tgt")), ("shape", {"as_ints": [-1]})], "reshape", [B * Tn], dtype=5)
    loss = p.call("cross_entropy_loss.default", [("self", T(logits)), ("target", T(labels))], "cross_entropy_loss", [])

    specs = [{"parameter": {"arg": {"name": ph}, "parameter_name": fqn}} for fqn, ph, _ in params]
    specs.append({"buffer": {"arg": {"name": "b_mask"}, "buffer_name": "mask", "persistent": False}})
    specs += [{"user_input": {"arg": T(x)}} for x in ("idx", "tgt")]
    program = {"graph_module": {"graph": {"inputs": [], "outputs": [T(loss)], "nodes": p.nodes,
                                          "tensor_values": p.values},
                                "signature": {"input_specs": specs,
                                              "output_specs": [{"user_output": {"arg": T(loss)}}]}},
               "schema_version": {"major": 8, "minor": 17}, "torch_version": "2.11.0 (bench/make_pt2_gpt.py)"}

    def meta(shape, dtype=7):
        strides, s = [], 1
        for n in reversed(shape):
            strides.insert(0, s)
            s *= n
        return {"dtype": dtype, "sizes": [I(n) for n in shape], "requires_grad": dtype == 7,
                "strides": [I(n) for n in strides], "storage_offset": I(0)}

    rng = np.random.default_rng(0)
    with zipfile.ZipFile(a.out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("gpt/archive_format", "pt2")
        z.writestr("gpt/archive_version", "0")
        z.writestr("gpt/byteorder", "little")
        z.writestr("gpt/models/model.json", json.dumps(program))
        config = {}
        for k, (fqn, _, shape) in enumerate(params):
            w = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype("<f4")
            if fqn.endswith("ln1.weight") or fqn.endswith("ln2.weight") or fqn == "lnf.weight":
                w[...] = 1
            z.writestr("gpt/data/weights/weight_%d" % k, w.tobytes())
            config[fqn] = {"path_name": "weight_%d" % k, "is_param": True, "use_pickle": False,
                           "tensor_meta": meta(shape)}
        z.writestr("gpt/data/weights/model_weights_config.json", json.dumps({"config": config}))
        mask = np.tril(np.ones((Tn, Tn), dtype=np.bool_))
        z.writestr("gpt/data/constants/tensor_0", mask.tobytes())
        z.writestr("gpt/data/constants/model_constants_config.json", json.dumps({"config": {"mask": {
            "path_name": "tensor_0", "is_param": False, "use_pickle": False,
            "tensor_meta": meta([Tn, Tn], dtype=12)}}}))
    print("make_pt2_gpt: %s: %d layers, d %d, %d parameters" %
          (a.out, L, d, sum(int(np.prod(s)) for _, _, s in params)))


if __name__ == "__main__":
    main()
