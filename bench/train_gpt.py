#!/usr/bin/python3
"""Trains the same GPT with dsc + dsrt and with PyTorch eager, in one run.

    /usr/bin/python3 bench/train_gpt.py [--threads 2] [--preset small|gpt2-small|all]

For each preset: export models/gpt.py (float32, dropout 0), compile it with
dsc (AdamW, no clipping), train `--steps` timed steps after `--warmup`
untimed ones with dsrt, and the same number with bench/train_pytorch.py
(same threads, batch, sequence, data: the project's own text as byte
tokens). PyTorch runs twice: as shipped, and with flush-to-zero like dsrt
(torch.set_flush_denormal(True)) -- the fair baseline; both on tcmalloc and
OpenBLAS's best kernels (bench/common.py's pytorch_blas). Prints a table of
tokens/s and peak RSS with ratios, and the planned arena next to dsrt's
measured peak RSS; --markdown FILE also writes it as a Markdown table.
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

PRESETS = {
    "small": ("6 layers, d=384, vocab 256, seq 256, batch 4",
              ["--layers", "6", "--d-model", "384", "--heads", "6", "--vocab", "256",
               "--seq", "256", "--batch", "4"]),
    "gpt2-small": ("GPT-2 small: 12 layers, d=768, vocab 50257, seq 256, batch 2",
                   ["--size", "gpt2-small", "--seq", "256", "--batch", "2"]),
}



def bench_preset(name, flags, a, work):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model, "--dropout", "0"] + flags)
    batch = int(flags[flags.index("--batch") + 1])
    seq = int(flags[flags.index("--seq") + 1])
    cfg = os.path.join(d, "ds_config.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
                   "steps_per_print": 1000, "gradient_clipping": 0.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}}}, f)
    plan = os.path.join(d, "plan")
    run([os.path.join(BIN, "dsc"), model, "--config", cfg, "-o", plan])
    manifest = open(os.path.join(plan, "manifest.txt")).read()
    arena = int(re.search(r"arena:\s+(\d+) bytes", manifest).group(1))
    out = run([os.path.join(BIN, "dsrt"), plan, "--data", a.data, "--steps",
               str(a.warmup + a.steps), "--threads", str(a.threads), "--out",
               os.path.join(d, "run")])
    rss = int(re.search(r"peak RSS (\d+) MiB", out).group(1))
    with open(os.path.join(d, "run", "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["step_time_s"]) for r in rows[a.warmup:]]
    dsc = {"tokens_per_s": batch * seq / statistics.mean(times), "peak_rss_mib": rss,
           "loss_last": float(rows[-1]["loss"])}
    torch = {}
    for mode, extra in (("torch", []), ("torch_ftz", ["--flush-denormal"])):
        o = run([PY, os.path.join(REPO, "bench", "train_pytorch.py"), "--data", a.data,
                 "--threads", str(a.threads), "--steps", str(a.steps), "--warmup-steps",
                 str(a.warmup)] + extra + ["--", "--dropout", "0"] + flags)
        torch[mode] = json.loads(o.strip().splitlines()[-1])
    return {"name": name, "arena_mib": arena / 2**20, "dsc": dsc, **torch}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--preset", choices=list(PRESETS) + ["all"], default="all")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--data", help="uint16 token file (default: built from the repo's text)")
    ap.add_argument("--markdown", help="also write the table here")
    a = ap.parse_args()
    blas = pytorch_blas()  # train_pytorch.py's runs inherit it
    print(blas, flush=True)
    work = tempfile.mkdtemp(prefix="dsc-bench-")
    if not a.data:
        a.data = token_file(work)
    names = list(PRESETS) if a.preset == "all" else [a.preset]
    lines = ["| model | dsc tok/s | torch tok/s | torch+FTZ tok/s | dsc / torch+FTZ | "
             "dsc RSS MiB | torch RSS MiB | RSS ratio | dsc planned arena MiB | RSS / arena |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        r = bench_preset(n, PRESETS[n][1], a, work)
        d, t, f = r["dsc"], r["torch"], r["torch_ftz"]
        lines.append(
            f"| {PRESETS[n][0]} | {d['tokens_per_s']:.0f} | {t['tokens_per_s']:.0f} | "
            f"{f['tokens_per_s']:.0f} | {d['tokens_per_s'] / f['tokens_per_s']:.2f}x | "
            f"{d['peak_rss_mib']} | {f['peak_rss_mib']:.0f} | "
            f"{d['peak_rss_mib'] / f['peak_rss_mib']:.2f} | {r['arena_mib']:.0f} | "
            f"{d['peak_rss_mib'] / r['arena_mib']:.2f} |")
        print(lines[-1], flush=True)
    text = (f"threads {a.threads}, {a.warmup} untimed + {a.steps} timed steps, float32, AdamW; "
            f"{blas}\n\n"
            + "\n".join(lines) + "\n")
    report(text, a.markdown)


if __name__ == "__main__":
    main()
