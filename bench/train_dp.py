#!/usr/bin/python3
"""Data parallelism on this machine: communication against bucket size, and
step time on 1 and 2 ranks, dsc next to PyTorch, in one run.

    /usr/bin/python3 bench/train_dp.py [--steps 4] [--warmup 2] [--markdown FILE]

Model: models/gpt.py, 6 layers, d=384, vocab 256, seq 128, micro-batch 4,
float32, dropout 0, AdamW; data: the project's own text as byte tokens.

1. Communication per step on 2 ranks for ZeRO 2 and 3 and bucket sizes of
   5e4 .. 5e8 elements: calls and elements by kind as dsrt's counters
   measured them (ZeRO units, an all-reduce counts 2x), as a multiple of P,
   next to dsc --explain's prediction, and the step time.
2. The same global batch (8 sequences) on 1 rank (gradient accumulation 2,
   2 threads) and on 2 ranks (1 thread each; ZeRO 0 and 2), dsc and
   PyTorch (eager, flush-to-zero; DistributedDataParallel over gloo for 2
   ranks): tokens/s, peak RSS per rank, and dsc's planned arena per rank.
3. Memory per rank of the GPT-2-small shape (124M parameters, seq 256,
   micro-batch 2) on 2 ranks, ZeRO 0-3, buckets of 1e7 elements: the
   planned arena (the plan's peak: state, activations, bucket staging)
   against the measured peak RSS (the largest over the ranks, which also
   holds the program, its libraries and MPI's own buffers). --skip-gpt2
   leaves it out.
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
MODEL = ["--layers", "6", "--d-model", "384", "--heads", "6", "--vocab", "256", "--seq", "128"]
MICRO, SEQ = 4, 128



def config(path, ga, dp, zero, bucket, micro=MICRO):
    with open(path, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": ga,
                   "train_batch_size": micro * ga * dp, "steps_per_print": 1000,
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
                   "zero_optimization": {"stage": zero, "overlap_comm": True,
                                         "reduce_bucket_size": bucket,
                                         "allgather_bucket_size": bucket,
                                         "stage3_prefetch_bucket_size": bucket,
                                         "stage3_param_persistence_threshold": 0}}, f)


def dsc_run(a, work, name, ga, dp, zero, bucket, threads, model=None, micro=MICRO, seq=SEQ,
            steps=None):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "ds_config.json")
    config(cfg, ga, dp, zero, bucket, micro)
    plan = os.path.join(d, "plan")
    run([os.path.join(BIN, "dsc"), model or a.model, "--config", cfg, "--dp", str(dp), "-o",
         plan])
    manifest = open(os.path.join(plan, "manifest.txt")).read()
    out = run([os.path.join(BIN, "dsrt"), plan, "--data", a.data, "--steps",
               str(steps or a.warmup + a.steps), "--threads", str(threads), "--out",
               os.path.join(d, "run")])
    with open(os.path.join(d, "run", "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["step_time_s"]) for r in rows[min(a.warmup, len(rows) - 1):]]
    step = statistics.mean(times)
    res = {"step_s": step, "tokens_per_s": micro * ga * dp * seq / step,
           "rss": int(re.search(r"peak RSS (\d+) MiB", out).group(1)),
           "arena_mib": int(re.search(r"arena:\s+(\d+) bytes", manifest).group(1)) / 2**20}
    m = re.search(r"P = (\d+) parameters", manifest)
    if m:
        res["P"] = int(m.group(1))
        res["predicted"] = {k: (int(c), int(e)) for k, c, e in re.findall(
            r"^  (all_reduce|reduce_scatter|all_gather): (\d+) calls, (\d+) elements",
            manifest, re.M)}
        line = re.search(r"^dsrt: communication per step: (.*)$", out, re.M).group(1)
        res["measured"] = {k: (int(c), int(e)) for k, c, e in re.findall(
            r"(all_reduce|reduce_scatter|all_gather) (\d+) calls? (\d+) elements", line)}
    return res


def torch_run(a, ranks, threads, batch):
    o = run([PY, os.path.join(REPO, "bench", "train_pytorch.py"), "--data", a.data,
             "--threads", str(threads), "--steps", str(a.steps), "--warmup-steps",
             str(a.warmup), "--flush-denormal", "--ddp", str(ranks), "--batch", str(batch),
             "--", "--dropout", "0"] + MODEL)
    return json.loads(o.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--skip-gpt2", action="store_true", help="leave out table 3")
    a = ap.parse_args()
    blas = pytorch_blas()  # train_pytorch.py's runs get it
    work = tempfile.mkdtemp(prefix="dsc-bench-dp-")
    a.data = token_file(work)
    a.model = os.path.join(work, "gpt.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", a.model, "--dropout", "0",
         "--dynamic-batch", "--batch", str(MICRO)] + MODEL)

    lines = ["| ZeRO | bucket (elements) | reduce_scatter calls | all_gather calls | "
             "all_reduce calls | elements / step | = x P | as predicted | step s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for zero in (2, 3):
        for bucket in (50_000, 200_000, 1_000_000, 500_000_000):
            r = dsc_run(a, work, f"z{zero}-b{bucket}", 1, 2, zero, bucket, 1)
            m = r["measured"]
            total = sum(e for _, e in m.values())
            lines.append(f"| {zero} | {bucket:,} | {m.get('reduce_scatter', (0, 0))[0]} | "
                         f"{m.get('all_gather', (0, 0))[0]} | {m.get('all_reduce', (0, 0))[0]} | "
                         f"{total:,} | {total / r['P']:.3f} | "
                         f"{'yes' if m == r['predicted'] else 'NO'} | {r['step_s']:.3f} |")
            print(lines[-1], flush=True)
    table1 = "\n".join(lines)

    lines = ["| run | ranks x threads | tokens/s | vs dsc 1 rank | peak RSS per rank MiB | "
             "planned arena per rank MiB |", "|---|---|---|---|---|---|"]
    base = dsc_run(a, work, "one", 2, 1, 0, 500_000_000, 2)
    rows = [("dsc, 1 rank, GA 2", "1 x 2", base),
            ("dsc, 2 ranks, ZeRO 0", "2 x 1", dsc_run(a, work, "dp2z0", 1, 2, 0, 500_000_000, 1)),
            ("dsc, 2 ranks, ZeRO 2", "2 x 1", dsc_run(a, work, "dp2z2", 1, 2, 2, 500_000_000, 1))]
    for name, rt, r in rows:
        lines.append(f"| {name} | {rt} | {r['tokens_per_s']:.0f} | "
                     f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x | {r['rss']} | "
                     f"{r['arena_mib']:.0f} |")
        print(lines[-1], flush=True)
    for name, ranks, threads, batch in (("PyTorch eager, 1 process, batch 8", 1, 2, 2 * MICRO),
                                        ("PyTorch DDP (gloo), 2 processes", 2, 1, MICRO)):
        t = torch_run(a, ranks, threads, batch)
        lines.append(f"| {name} | {ranks} x {threads} | {t['tokens_per_s']:.0f} | "
                     f"{t['tokens_per_s'] / base['tokens_per_s']:.2f}x | "
                     f"{t['peak_rss_mib']:.0f} | - |")
        print(lines[-1], flush=True)
    table2 = "\n".join(lines)
    table3 = ""
    if not a.skip_gpt2:
        gpt2 = os.path.join(work, "gpt2.onnx")
        run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", gpt2, "--dropout", "0",
             "--size", "gpt2-small", "--seq", "256", "--batch", "2", "--dynamic-batch"])
        lines = ["| ZeRO | planned arena per rank MiB | peak RSS per rank MiB | RSS / arena |",
                 "|---|---|---|---|"]
        for zero in (0, 1, 2, 3):
            r = dsc_run(a, work, f"gpt2-z{zero}", 1, 2, zero, 10_000_000, 1, model=gpt2,
                        micro=2, seq=256, steps=2)
            lines.append(f"| {zero} | {r['arena_mib']:.0f} | {r['rss']} | "
                         f"{r['rss'] / r['arena_mib']:.3f} |")
            print(lines[-1], flush=True)
        table3 = ("\n\nGPT-2-small shape on 2 ranks, buckets of 1e7 elements, memory per "
                  "rank:\n\n" + "\n".join(lines))
    text = (f"{os.cpu_count()} cores, {a.warmup} untimed + {a.steps} timed steps, float32, "
            f"AdamW; GPT 6 layers d=384 seq {SEQ}, micro-batch {MICRO}\n\n"
            f"Communication per step on 2 ranks:\n\n{table1}\n\n"
            f"Global batch 8 on 1 and 2 ranks:\n\n{table2}{table3}\n")
    report(blas + "\n\n" + text, a.markdown)


if __name__ == "__main__":
    main()
