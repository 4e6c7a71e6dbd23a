#!/usr/bin/python3
"""dsc --fuse attention against the unfused plan and PyTorch eager, in one run.

    /usr/bin/python3 bench/attention.py [--threads 2] [--steps 5] [--markdown FILE]

For each shape: export models/gpt.py (float32, dropout 0.1), compile it with
dsc twice (--fuse none, and --fuse attention, which dsc's default --fuse all
does today; AdamW), train `--warmup` untimed
and `--steps` timed steps of each with dsrt, and the same model with
bench/train_pytorch.py (PyTorch eager, flush-to-zero like dsrt, the best
OpenBLAS core for this CPU). Reports tokens/s, the plans' activation bytes
(the manifest's `activations`, the arena less the model state) and dsrt's
peak RSS, with the ratios fused / unfused and dsc / PyTorch. The fused and
unfused runs train bitwise alike (test/e2e/fuse-attention.test); their
final losses are printed as a check.
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, REPO, pytorch_blas, report, run, token_file  # noqa: E402

SHAPES = [
    ("4 layers, d=256, 4 heads, seq 256, batch 4",
     ["--layers", "4", "--d-model", "256", "--heads", "4", "--vocab", "256", "--seq", "256",
      "--batch", "4"]),
    ("4 layers, d=256, 4 heads, seq 1024, batch 1",
     ["--layers", "4", "--d-model", "256", "--heads", "4", "--vocab", "256", "--seq", "1024",
      "--batch", "1"]),
    # The bundled GPT (scripts/run-main.sh's) at long sequences.
    ("bundled GPT (4 layers, d=128, 4 heads), seq 1024, batch 1",
     ["--layers", "4", "--d-model", "128", "--heads", "4", "--vocab", "256", "--seq", "1024",
      "--batch", "1"]),
    ("bundled GPT (4 layers, d=128, 4 heads), seq 4096, batch 1",
     ["--layers", "4", "--d-model", "128", "--heads", "4", "--vocab", "256", "--seq", "4096",
      "--batch", "1"]),
]


def dsrt_run(model, cfg, fuse, a, d):
    plan = os.path.join(d, "plan-" + fuse)
    run([os.path.join(BIN, "dsc"), model, "--config", cfg, "--fuse", fuse, "-o", plan])
    manifest = open(os.path.join(plan, "manifest.txt")).read()
    activations = int(re.search(r"activations:\s+(\d+) bytes", manifest).group(1))
    out = run([os.path.join(BIN, "dsrt"), plan, "--data", a.data, "--steps",
               str(a.warmup + a.steps), "--threads", str(a.threads), "--out",
               os.path.join(d, "run-" + fuse)])
    rss = int(re.search(r"peak RSS (\d+) MiB", out).group(1))
    with open(os.path.join(d, "run-" + fuse, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["step_time_s"]) for r in rows[a.warmup:]]
    return {"step": statistics.median(times), "activations": activations, "rss": rss,
            "loss": rows[-1]["loss"]}


def bench_shape(i, flags, a, work):
    d = os.path.join(work, "shape%d" % i)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model, "--dropout", "0.1"] + flags)
    batch = int(flags[flags.index("--batch") + 1])
    cfg = os.path.join(d, "ds_config.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
                   "steps_per_print": 1000, "gradient_clipping": 0.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}}}, f)
    r = {fuse: dsrt_run(model, cfg, fuse, a, d) for fuse in ("none", "attention")}
    o = run([PY, os.path.join(REPO, "bench", "train_pytorch.py"), "--data", a.data,
             "--threads", str(a.threads), "--steps", str(a.steps), "--warmup-steps",
             str(a.warmup), "--flush-denormal", "--", "--dropout", "0.1"] + flags)
    r["torch"] = json.loads(o.strip().splitlines()[-1])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--data", help="uint16 token file (default: built from the repo's text)")
    ap.add_argument("--markdown", help="also write the table here")
    a = ap.parse_args()
    blas = pytorch_blas()
    print(blas, flush=True)
    work = tempfile.mkdtemp(prefix="dsc-attention-")
    if not a.data:
        a.data = token_file(work)
    lines = ["| model | unfused step | fused step | fused / unfused time | PyTorch step | "
             "fused / PyTorch speed | unfused activations | fused activations | "
             "activations saved | unfused RSS | fused RSS | losses (unfused, fused) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, (name, flags) in enumerate(SHAPES):
        r = bench_shape(i, flags, a, work)
        n, f, t = r["none"], r["attention"], r["torch"]
        torch_step = t["step_time_median_s"]
        lines.append(
            f"| {name} | {n['step'] * 1e3:.1f} ms | {f['step'] * 1e3:.1f} ms | "
            f"{f['step'] / n['step']:.2f} | {torch_step * 1e3:.1f} ms | "
            f"{torch_step / f['step']:.2f}x | {n['activations'] / 2**20:.1f} MiB | "
            f"{f['activations'] / 2**20:.1f} MiB | "
            f"{n['activations'] / max(f['activations'], 1):.2f}x | {n['rss']} MiB | "
            f"{f['rss']} MiB | {n['loss']}, {f['loss']} |")
        print(lines[-1], flush=True)
    text = (f"threads {a.threads}, {a.warmup} untimed + {a.steps} timed steps (median), "
            f"float32, dropout 0.1, AdamW; {blas}\n\n" + "\n".join(lines) + "\n")
    report(text, a.markdown)


if __name__ == "__main__":
    main()
