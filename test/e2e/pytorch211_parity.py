#!/usr/bin/env python3
"""Trains each PyTorch 2.11 export of ../shared/pytorch-2.11 with dsc + dsrt
and compares the losses with PyTorch 2.11's own (reference.json).

    pytorch211_parity.py DSC DSRT PT211_DIR WORKDIR [--torchscript]

For the GPT and the LLaMA, the dynamo ONNX (opset 20), the torch.export
archive (.pt2) and the legacy ONNX (opset 17) each train 10 steps of AdamW
on the one batch with the README's ds_config; each loss must be within
RTOL (1e-5) of PyTorch's, relative. Then the GPT's dynamo export trains
on 2 ranks with ZeRO 3 (each rank the same batch, so the global step is one
rank's) and with tensor parallelism 2: each must be within RTOL of the one
rank run. One line per run, "NAME: OK: 10 steps, loss rel diff max X <= RTOL"
or "NAME: FAIL: ...", and exit status 1 if any failed.
"""
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np

RTOL = 1e-5
STEPS = 10
CONFIG = {"train_micro_batch_size_per_gpu": 8,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999],
                                                    "eps": 1e-8, "weight_decay": 0.01}},
          "gradient_clipping": 0.0}


def losses(run):
    with open(os.path.join(run, "metrics.csv")) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def train(dsc, dsrt, model, work, name, data, flags=()):
    plan, run = os.path.join(work, name + "-plan"), os.path.join(work, name + "-run")
    subprocess.run([dsc, model, "--config", os.path.join(work, "config.json"), "-o", plan,
                    *flags], check=True, stderr=subprocess.DEVNULL)
    subprocess.run([dsrt, plan, "--data", data, "--steps", str(STEPS), "--out", run],
                   check=True, stdout=subprocess.DEVNULL)
    return losses(run)


def report(name, got, want):
    if len(got) != len(want):
        print("%s: FAIL: %d steps, expected %d" % (name, len(got), len(want)))
        return False
    diff = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    ok = diff <= RTOL
    print("%s: %s: %d steps, loss rel diff max %.3g <= %g" %
          (name, "OK" if ok else "FAIL", len(got), diff, RTOL))
    return ok


# The TorchScript archives keep no input shapes (dsc --input-shape).
TRACE_FLAGS = ("--input-shape", "idx=8x64", "--input-shape", "tgt=8x64")


def main():
    dsc, dsrt, shared, work = sys.argv[1:5]
    # --torchscript: the torch.jit.trace archives instead (dsc built with
    # libtorch), with the same checks on the GPT's.
    torchscript = sys.argv[5:] == ["--torchscript"]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    reference = json.load(open(os.path.join(shared, "reference.json")))
    data = os.path.join(shared, "data")
    ok = True
    runs = {}
    forms = ("_trace.pt",) if torchscript else ("_dynamo.onnx", ".pt2", "_legacy.onnx")
    flags = TRACE_FLAGS if torchscript else ()
    for model in ("gpt", "llama"):
        want = reference[model]["losses_adamw_cpu_fp32"][:STEPS]
        for form in forms:
            name = model + form
            runs[name] = train(dsc, dsrt, os.path.join(shared, name), work, name, data, flags)
            ok &= report(name, runs[name], want)
    # The same batch on each of 2 ranks: the global step is one rank's.
    doubled = os.path.join(work, "data2")
    os.makedirs(doubled)
    for input_name in ("idx", "tgt"):
        a = np.load(os.path.join(data, input_name + ".npy"))
        np.save(os.path.join(doubled, input_name + ".npy"), np.concatenate([a, a]))
    base = "gpt_trace.pt" if torchscript else "gpt_dynamo.onnx"
    one = runs[base]
    model = os.path.join(shared, base)
    ok &= report(base + " dp 2 ZeRO 3 vs 1 rank",
                 train(dsc, dsrt, model, work, "dp2", doubled,
                       ("--dp", "2", "--zero", "3") + flags), one)
    ok &= report(base + " tp 2 vs 1 rank",
                 train(dsc, dsrt, model, work, "tp2", data, ("--tp", "2") + flags), one)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
