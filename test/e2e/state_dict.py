#!/usr/bin/python3
"""PyTorch state dicts as safetensors, for checkpoint-export.test.

    state_dict.py init MODEL.onnx OUT.safetensors [--drop K] [--add K]
        [--reshape K] [--dtype K=F64] [--perturb K]
    state_dict.py loss MODEL.onnx WEIGHTS.safetensors --config DS.json
        --data TOKENS --step N --metrics RUN/metrics.csv --rtol R
    state_dict.py same-loss RUN_A/metrics.csv:STEP RUN_B/metrics.csv:STEP
    state_dict.py eval-loss MODEL.onnx WEIGHTS.safetensors --data TOKENS
        --micro-batch B --micro-batches M --dp D --batches K
        --metrics RUN/metrics.csv --step N --rtol R

init: rebuilds the PyTorch model that models/<name>.py exported (from the
export's sidecar, seeded as the export was) and writes its whole
state_dict, every key in its own dtype (a tied weight under each of its
names, the bool causal masks), as PyTorch would save it; the options break
it for the error cases of dsrt --init (drop a key, add one, transpose one,
change its dtype, change one of its values).

loss: reads WEIGHTS with numpy (no `safetensors` package here), loads it into
the rebuilt model with load_state_dict(strict=True), and computes the loss
of training step N's batch (the mean over the step's micro-batches, in
dsrt's data order: reference_train.Data) in float32; it must be within
relative R of the loss dsrt logged for step N, which is computed with the
same weights before that step's update.

same-loss: the two logged losses must be bitwise equal.

eval-loss: the validation loss dsrt --eval-data logged after step N (its
eval_loss column) against PyTorch's in eval mode (dropout off) with
WEIGHTS, the weights after step N: K evaluation batches, batch j the mean
over its M x D micro-batches, global micro-batch (j M + k) D + r of
dsrt's data order, and their mean. It must be within relative R. The same
batches in train mode (dropout on) are printed beside it: they must differ
by more than R, so the check tells the two modes apart.
"""
import argparse
import csv
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import reference_train as rt  # noqa: E402

NP_TO_ST = {np.dtype("float32"): "F32", np.dtype("float64"): "F64",
            np.dtype("float16"): "F16", np.dtype("int64"): "I64",
            np.dtype("int32"): "I32", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL"}


def fail(msg):
    print("state_dict: FAIL: " + msg)
    sys.exit(1)


def write_safetensors(path, tensors):
    """tensors: [(name, numpy array)] in any dtype of NP_TO_ST."""
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": NP_TO_ST[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def build(onnx_path):
    """The exported PyTorch model, with the weights it was exported with."""
    import torch
    _, mod, margs = rt.load_model_args(onnx_path, None, None)
    torch.manual_seed(margs.seed)  # as export_common.build_and_export does
    return mod.build_model(margs)


def init(args):
    model = build(args.model)
    sd = [(k, v.detach().cpu().numpy().copy()) for k, v in model.state_dict().items()]
    keys = [k for k, _ in sd]
    for k in args.drop + args.reshape + args.perturb + [d.split("=")[0] for d in args.dtype]:
        if k not in keys:
            fail("no key %s in the state_dict (%s)" % (k, ", ".join(keys)))
    sd = [(k, v) for k, v in sd if k not in args.drop]
    out = []
    for k, v in sd:
        if k in args.reshape:
            v = np.ascontiguousarray(v.T)
        if k in args.perturb:
            v = v.copy()
            flat = v.reshape(-1)
            flat[0] = (not flat[0]) if v.dtype == np.bool_ else flat[0] + 1
        for d in args.dtype:
            name, dt = d.split("=")
            if name == k:
                v = v.astype({"F64": np.float64, "F16": np.float16, "I64": np.int64}[dt])
        out.append((k, v))
    for k in args.add:
        out.append((k, np.zeros(3, np.float32)))
    write_safetensors(args.out, out)
    print("state_dict: %s: %d keys" % (args.out, len(out)))


def read_metrics_loss(path, step):
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["step"]) == step:
                return float(row["loss"])
    fail("%s has no step %d" % (path, step))


def loss(args):
    import torch
    model = build(args.model)
    tensors = compare.read_safetensors(args.weights)
    state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tensors.items()}
    # strict=True: every key of the model's state_dict, nothing else, each
    # of its shape (load_state_dict raises otherwise).
    model.load_state_dict(state, strict=True)
    tied = [k for k, p in model.state_dict(keep_vars=True).items()
            if any(q is p and j != k for j, q in model.state_dict(keep_vars=True).items())]
    with open(args.config) as f:
        cfg = json.load(f)
    _, mb, gas = rt.resolve_batch(cfg)
    inputs, _ = rt.onnx_graph_info(args.model)
    data = rt.Data(args.data, inputs, mb)
    model.train()  # as exported (dropout 0 in this test)
    with torch.no_grad():
        losses = [model(*data.micro_batch((args.step - 1) * gas + m)).item()
                  for m in range(gas)]
    ours = float(np.mean(np.array(losses, dtype=np.float64)))
    theirs = read_metrics_loss(args.metrics, args.step)
    rel = compare.rel(ours, theirs)
    if rel > args.rtol:
        fail("loss %.9g, dsrt's step %d loss %.9g: relative difference %.3g > %g"
             % (ours, args.step, theirs, rel, args.rtol))
    print("state_dict: load_state_dict(strict=True) took %d keys (%d sharing a tensor); loss of step %d's "
          "batch %.6f, dsrt's %.6f: relative difference %.1e <= %g"
          % (len(state), len(tied), args.step, ours, theirs, rel, args.rtol))


def same_loss(args):
    vals = []
    for spec in (args.a, args.b):
        path, step = spec.rsplit(":", 1)
        vals.append(read_metrics_loss(path, int(step)))
    # metrics.csv prints the float32 loss with %.9g: equal values are equal
    # bits.
    if vals[0] != vals[1]:
        fail("%s: %r, %s: %r" % (args.a, vals[0], args.b, vals[1]))
    print("state_dict: bitwise equal losses %r" % vals[0])


def read_metrics_column(path, step, column):
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["step"]) == step:
                if not row.get(column):
                    fail("%s: step %d has no %s" % (path, step, column))
                return float(row[column])
    fail("%s has no step %d" % (path, step))


def eval_loss(args):
    import torch
    model = build(args.model)
    tensors = compare.read_safetensors(args.weights)
    state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tensors.items()}
    # dsrt's run folder holds the trained parameters, each once: the
    # missing keys may only be buffers (the causal masks) and the other
    # name of a tied weight.
    params = dict(model.named_parameters())  # one name per tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if k in params] + list(unexpected)
    if bad:
        fail("%s does not match the model: %s" % (args.weights, ", ".join(bad)))
    inputs, _ = rt.onnx_graph_info(args.model)
    data = rt.Data(args.data, inputs, args.micro_batch)
    per_batch = args.micro_batches * args.dp

    def mean_loss():
        batches = []
        with torch.no_grad():
            for j in range(args.batches):
                losses = [model(*data.micro_batch(j * per_batch + g)).item()
                          for g in range(per_batch)]
                batches.append(np.mean(np.array(losses, dtype=np.float64)))
        return float(np.mean(batches))

    model.eval()
    ours = mean_loss()
    model.train()
    torch.manual_seed(0)
    train_mode = mean_loss()
    theirs = read_metrics_column(args.metrics, args.step, "eval_loss")
    rel = compare.rel(ours, theirs)
    if rel > args.rtol:
        fail("eval-mode loss %.9g, dsrt's validation loss after step %d %.9g: relative "
             "difference %.3g > %g" % (ours, args.step, theirs, rel, args.rtol))
    apart = compare.rel(train_mode, theirs)
    if apart <= args.rtol:
        fail("the train-mode loss %.9g is as close (%.3g) to dsrt's %.9g: the check does not "
             "tell dropout on from off (export with --dropout > 0)" % (train_mode, apart, theirs))
    print("state_dict: validation loss after step %d over %d batches of %d micro-batches: "
          "PyTorch eval mode %.8f, dsrt %.8f, relative difference %.1e <= %g (train mode "
          "%.6f, %.1e apart)" % (args.step, args.batches, per_batch, ours, theirs, rel,
                                 args.rtol, train_mode, apart))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("model")
    i.add_argument("out")
    for opt in ("drop", "add", "reshape", "dtype", "perturb"):
        i.add_argument("--" + opt, action="append", default=[])
    lo = sub.add_parser("loss")
    lo.add_argument("model")
    lo.add_argument("weights")
    lo.add_argument("--config", required=True)
    lo.add_argument("--data", required=True)
    lo.add_argument("--step", type=int, required=True)
    lo.add_argument("--metrics", required=True)
    lo.add_argument("--rtol", type=float, required=True)
    s = sub.add_parser("same-loss")
    s.add_argument("a")
    s.add_argument("b")
    e = sub.add_parser("eval-loss")
    e.add_argument("model")
    e.add_argument("weights")
    e.add_argument("--data", required=True)
    for opt in ("micro-batch", "micro-batches", "dp", "batches", "step"):
        e.add_argument("--" + opt, type=int, required=True)
    e.add_argument("--metrics", required=True)
    e.add_argument("--rtol", type=float, required=True)
    args = p.parse_args()
    {"init": init, "loss": loss, "same-loss": same_loss, "eval-loss": eval_loss}[args.cmd](args)


if __name__ == "__main__":
    main()
