#!/usr/bin/python3
"""dsc --simulate against the published BERT scaling on AWS DL1 (first-
generation Gaudi): BERT-Large on 1, 2, 4 and 8 instances, BERT 1.5B on 8,
64 and 128 cards, from hardware/gaudi-dl1.json.

    /usr/bin/python3 bench/gaudi_bert.py [--hardware FILE] [--calibrate] [--markdown FILE]

Published (AWS Machine Learning Blog, "Accelerate PyTorch with DeepSpeed to
train large language models with Intel Habana Gaudi-based DL1 EC2
instances", 2023), scaling efficiency = throughput per card against one
instance's (8 cards):
  BERT-Large, 1/2/4/8 instances: 100 / 98.04 / 95.88 / 90.39 %
  BERT 1.5B, 8/64/128 cards:     100 / 85.1 / 82.7 %
The runs' settings, from the blog and the scripts it follows (Habana's
Model-References deepspeed-bert, as AWS's DL1 workshop runs them): bf16,
ZeRO stage 1, LAMB, gradient clipping 1.0, sequence 128 (phase 1);
BERT-Large micro-batch 32 per card and train_batch_size 65536 (so the
gradient accumulation falls from 256 to 32 as the instances grow); BERT
1.5B (48 layers, hidden 1600, 25 heads, FFN 6400) micro-batch 16 and 24
accumulation steps per card (384 samples a card, whatever the count).

The models are `models/bert.py --no-weights` exports (HF's masked-LM head
over every position, no NSP head). The configs are Habana's, which leave
`communication_data_type` unset: dsc then reduces the gradients in fp32,
the dtype it accumulates them in. Habana's 2022 fork all-reduced each
bucket in bf16 at stage 1 (docs/planning-at-scale.md), which moves as many
bytes as the fp32 reduce-scatter: column "fp32" models what ran; column
"bf16" is today's DeepSpeed, which reduce-scatters in bf16.

--calibrate solves for the bf16 GEMM rate at which the plan of BERT-Large
with micro-batch 64 on 8 cards reaches Habana's published phase-1
throughput (1489 sequences/s on 8 first-generation Gaudi, bf16, batch 64
a card; Habana's model performance page), the one figure of the file not
from a data sheet, and prints it. Without it, the file's rate is used.
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, REPO, report, run  # noqa: E402

BERT_LARGE = dict(layers=24, d_model=1024, heads=16, intermediate=4096)
BERT_15B = dict(layers=48, d_model=1600, heads=25, intermediate=6400)
HABANA_BERT_L_8 = 1489.0  # sequences/s, phase 1, 8 cards, batch 64 a card

# (model, name, micro-batch, [(cards, train_batch_size, published %)])
SCALING = [
    (BERT_LARGE, "BERT-Large", 32,
     [(8, 65536, 100.0), (16, 65536, 98.04), (32, 65536, 95.88), (64, 65536, 90.39)]),
    (BERT_15B, "BERT 1.5B", 16,
     [(8, 8 * 384, 100.0), (64, 64 * 384, 85.1), (128, 128 * 384, 82.7)]),
]


def export(work, shape, batch):
    path = os.path.join(work, "bert-%dx%d-b%d.onnx" % (shape["layers"], shape["d_model"], batch))
    if not os.path.exists(path):
        run([PY, os.path.join(REPO, "models", "bert.py"), "--layers", str(shape["layers"]),
             "--d-model", str(shape["d_model"]), "--heads", str(shape["heads"]),
             "--intermediate", str(shape["intermediate"]), "--vocab", "30522", "--seq", "128",
             "--max-pos", "512", "--batch", str(batch), "--no-weights", "-o", path])
    return path


def simulate(work, model, micro, cards, train_batch, hw, comm=None):
    """Predicted samples/s and step seconds of the run on `cards` cards,
    the gradients reduced in `comm` (None: dsc's default, fp32)."""
    cfg = os.path.join(work, "ds_config-%d-%d-%d-%s.json" % (micro, cards, train_batch, comm))
    config = {"train_batch_size": train_batch, "train_micro_batch_size_per_gpu": micro,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
              "gradient_clipping": 1.0,
              "optimizer": {"type": "Lamb", "params": {"lr": 0.006, "weight_decay": 0.01}}}
    if comm:
        config["communication_data_type"] = comm
    with open(cfg, "w") as f:
        json.dump(config, f)
    out = run([os.path.join(BIN, "dsc"), model, "--config", cfg, "--dp", str(cards),
               "--simulate", "--hardware", hw])
    m = re.search(r"^step time:\s+([\d.]+) (ms|s) predicted \(([\d.]+) samples/s", out, re.M)
    if not m:
        sys.exit("bench: no step time in dsc's output:\n" + out)
    step = float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)
    return float(m.group(3)), step


def with_rate(work, hw, tflops):
    """A copy of hardware file `hw` whose bf16 (and f16) GEMM rate is `tflops`."""
    text = open(hw).read()
    data = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    for d in ("bf16", "f16"):
        data["gemm"][d]["tflops"] = tflops
    path = os.path.join(work, "hw-%.3f.json" % tflops)
    with open(path, "w") as f:
        json.dump(data, f)
    return path


def calibrate(work, hw):
    """The bf16 GEMM rate at which BERT-Large, micro-batch 64 on 8 cards,
    predicts HABANA_BERT_L_8: the step is a + b / rate as long as the
    GEMMs stay on the critical path, so two points give it; a secant step
    more checks it."""
    model = export(work, BERT_LARGE, 64)
    train_batch = 64 * 8 * 128  # Habana's phase 1: 65536 sequences a step
    target_step = train_batch / HABANA_BERT_L_8
    rates = [40.0, 80.0]
    steps = [simulate(work, model, 64, 8, train_batch, with_rate(work, hw, r))[1] for r in rates]
    for _ in range(3):
        (r0, r1), (s0, s1) = rates[-2:], steps[-2:]
        # s = a + b / r through both points
        b = (s0 - s1) / (1 / r0 - 1 / r1)
        a = s0 - b / r0
        r = b / (target_step - a)
        rates.append(r)
        steps.append(simulate(work, model, 64, 8, train_batch, with_rate(work, hw, r))[1])
        print(f"  bf16 GEMM {r:.2f} TFLOP/s: {train_batch / steps[-1]:.1f} sequences/s "
              f"(target {HABANA_BERT_L_8})", flush=True)
        if abs(steps[-1] / target_step - 1) < 1e-4:
            break
    return rates[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hardware", default=os.path.join(REPO, "hardware", "gaudi-dl1.json"))
    p.add_argument("--calibrate", action="store_true",
                   help="solve for the bf16 GEMM rate from Habana's BERT-Large throughput first")
    p.add_argument("--work", help="folder for the exports and configs (default: a new one)")
    p.add_argument("--markdown", help="also write the table here")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="dsc-gaudi-bert-")
    os.makedirs(work, exist_ok=True)
    hw = a.hardware
    lines = []
    if a.calibrate:
        print("== calibrating the bf16 GEMM rate on BERT-Large, 8 cards", flush=True)
        rate = calibrate(work, hw)
        hw = with_rate(work, hw, rate)
        lines.append(f"calibrated bf16 GEMM rate: {rate:.2f} TFLOP/s "
                     f"(BERT-Large at {HABANA_BERT_L_8:.0f} sequences/s on 8 cards)\n")
    rows = []
    for shape, name, micro, points in SCALING:
        model = export(work, shape, micro)
        base = {}
        for cards, train_batch, published in points:
            ga = train_batch // (micro * cards)
            row = [name, cards, ga, published]
            for comm in (None, "bf16"):
                t0 = time.perf_counter()
                rate, step = simulate(work, model, micro, cards, train_batch, hw, comm)
                took = time.perf_counter() - t0
                base.setdefault(comm, rate / cards)
                eff = 100.0 * rate / cards / base[comm]
                row += [step, rate, eff, took]
                print(f"  {name:10s} {cards:4d} cards, {ga:3d} micro-batches, gradients in "
                      f"{comm or 'fp32'}: step {step:7.3f} s, {rate:8.1f} samples/s, "
                      f"efficiency {eff:6.2f}% (published {published}%), dsc {took:.1f} s",
                      flush=True)
            rows.append(row)
    hw_name = json.loads(re.sub(r"^\s*//.*$", "", open(hw).read(), flags=re.M))["name"]
    lines += [f"dsc --simulate, hardware file: {hw_name}", "",
              "| model | cards | micro-batches a step | predicted step (fp32) | samples/s (fp32) | "
              "efficiency, gradients reduced in fp32 | in bf16 | published | difference "
              "(fp32, bf16) | dsc time |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, cards, ga, pub, s32, r32, e32, t32, s16, r16, e16, t16 in rows:
        lines.append(f"| {name} | {cards} | {ga} | {s32:.3f} s | {r32:.1f} | {e32:.2f}% | "
                     f"{e16:.2f}% | {pub}% | {e32 - pub:+.2f}, {e16 - pub:+.2f} points | "
                     f"{t32:.1f} s |")
    for label, k in (("fp32", 6), ("bf16", 10)):
        worst = max(abs(r[k] - r[3]) for r in rows)
        lines.append(f"\nlargest difference, gradients reduced in {label}: {worst:.2f} points")
    report("\n".join(lines) + "\n", a.markdown)


if __name__ == "__main__":
    main()
