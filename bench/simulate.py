#!/usr/bin/python3
"""dsc --simulate against dsrt on this machine: the bundled GPT's step time
predicted from a hardware file and measured, on 1, 2 and 4 ranks, across
data, pipeline and tensor parallelism and the ZeRO stages, in one run.

    /usr/bin/python3 bench/simulate.py [--hardware FILE] [--steps 30] [--markdown FILE]

Without --hardware it first measures this machine (bench/calibrate.py) into
the work folder. Model: the main job's GPT (4 layers, d=128, 4 heads, seq
64, vocabulary 256, dropout 0.1, micro-batch 8), AdamW, clipping 1.0, on
byte tokens of the project's own text. Each layout: dsc -o plan --simulate,
then dsrt --repeats times for --steps steps; a run's step time is the
median step_time_s after its first third, and measured is the median of
the runs (their range is shown: a step on this machine varies from run to
run, issue 47). Error = predicted / measured - 1.
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, hardware_file, main_job_gpt, repeated_step, report, run,  # noqa: E402
                    token_file)

# name, dsc flags, micro-batches per step
LAYOUTS = [
    ("1 rank", ["--dp", "1"], 1),
    ("1 rank, 2 micro-batches", ["--dp", "1"], 2),
    ("dp 2, ZeRO 0", ["--dp", "2", "--zero", "0"], 1),
    ("dp 2, ZeRO 1", ["--dp", "2", "--zero", "1"], 1),
    ("dp 2, ZeRO 2", ["--dp", "2", "--zero", "2"], 1),
    ("dp 2, ZeRO 3", ["--dp", "2", "--zero", "3"], 1),
    ("pp 2, 4 micro-batches", ["--pp", "2"], 4),
    ("tp 2", ["--tp", "2"], 1),
    ("tp 2 + sp", ["--tp", "2", "--sequence-parallel"], 1),
    ("dp 4, ZeRO 2", ["--dp", "4", "--zero", "2"], 1),
    ("pp 2 x dp 2, ZeRO 1", ["--pp", "2", "--dp", "2", "--zero", "1"], 4),
    ("tp 2 x dp 2, ZeRO 1", ["--tp", "2", "--dp", "2", "--zero", "1"], 1),
    ("pp 4, 8 micro-batches", ["--pp", "4"], 8),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hardware", help="a hardware file (default: measure this machine)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3, help="dsrt runs per layout")
    p.add_argument("--markdown", help="also write the table here")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="dsc-simulate-")
    hw = hardware_file(work, a.hardware)
    data = token_file(work)
    model = main_job_gpt(work)
    rows = []
    for name, flags, micro in LAYOUTS:
        d = os.path.join(work, re.sub(r"[^a-z0-9]+", "-", name.lower()))
        os.makedirs(d)
        cfg = os.path.join(d, "ds_config.json")
        with open(cfg, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": micro,
                       "steps_per_print": 1000, "gradient_clipping": 1.0,
                       "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.1}},
                       "zero_optimization": {"stage": 0, "reduce_bucket_size": 200000,
                                             "allgather_bucket_size": 200000}}, f)
        out = run([os.path.join(BIN, "dsc"), model, "--config", cfg, "-o",
                   os.path.join(d, "plan"), "--simulate", "--hardware", hw] + flags)
        predicted = float(re.search(r"^step time:\s+([\d.]+) ms", out, re.M).group(1)) / 1e3
        measured, lo, hi = repeated_step(os.path.join(d, "plan"), data, a.steps, a.repeats,
                                         os.path.join(d, "run"))
        rows.append((name, predicted, measured, lo, hi))
        print(f"  {name:26s} predicted {predicted * 1e3:8.2f} ms  measured {measured * 1e3:8.2f} ms"
              f" ({lo * 1e3:.2f}-{hi * 1e3:.2f})"
              f"  {100 * (predicted / measured - 1):+6.1f}%", flush=True)
    cpu = json.load(open(hw))["name"]
    lines = [f"dsc --simulate against dsrt, the bundled GPT, {a.repeats} runs of {a.steps} steps "
             f"per layout; hardware file: {cpu}", "",
             "| layout | predicted step | measured step (median of the runs) | runs' range | error |",
             "|---|---|---|---|---|"]
    for name, pr, me, lo, hi in rows:
        lines.append(f"| {name} | {pr * 1e3:.2f} ms | {me * 1e3:.2f} ms | "
                     f"{lo * 1e3:.2f}-{hi * 1e3:.2f} ms | {100 * (pr / me - 1):+.1f}% |")
    errors = [abs(r[1] / r[2] - 1) for r in rows]
    lines.append("")
    lines.append(f"largest error {100 * max(errors):.1f}%, mean {100 * statistics.mean(errors):.1f}%")
    report("\n".join(lines) + "\n", a.markdown)


if __name__ == "__main__":
    main()
