#!/usr/bin/python3
"""dsc --auto's ranking against dsrt's measured steps, on this machine.

    /usr/bin/python3 bench/auto.py [--hardware FILE] [--ranks 2] [--steps 30] [--repeats 3]

The main job's GPT (as bench/simulate.py), --auto over --ranks ranks of this
machine (--device-memory 1GiB: every layout fits); then every layout it
lists is compiled with its dsc command and run --repeats times for --steps
steps. Prints the predicted and measured step of each, in the predicted
order, and whether the measured order agrees (Spearman's rank correlation
and the measured rank of the predicted best).
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, hardware_file, main_job_gpt, repeated_step, run, token_file  # noqa: E402

ROW = re.compile(r"^\s+\d+\s+([\d.]+) (s|ms)\s+[\d.]+\s+[\d.]+%\s+\S+ \S+\s+"
                 r"dp (\d+) x pp (\d+) x tp (\d+)(\+sp)?, ZeRO (\d), recompute (\w+)", re.M)


def ranks(values):
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    """Spearman's rank correlation (Pearson's of the ranks, ties averaged)."""
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    if n < 2:
        return 1.0
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else 1.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hardware", help="a hardware file (default: measure this machine)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="dsc-auto-")
    hw = hardware_file(work, a.hardware)
    data = token_file(work)
    model = main_job_gpt(work)
    out = run([os.path.join(BIN, "dsc"), model, "--auto", "--ranks", str(a.ranks),
               "--device-memory", "1GiB", "--hardware", hw, "--top", "100"])
    print(out)
    rows = []
    for m in ROW.finditer(out):
        step = float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1)
        dp, pp, tp = int(m.group(3)), int(m.group(4)), int(m.group(5))
        flags = ["--dp", str(dp), "--zero", m.group(7), "--recompute", m.group(8),
                 "--micro-batches", str(a.ranks // dp)]
        if tp > 1:
            flags += ["--tp", str(tp)] + (["--sequence-parallel"] if m.group(6) else [])
        if pp > 1:
            flags += ["--pp", str(pp)]
        name = m.group(0).split("  ")[-1].strip()
        rows.append((name, step, flags))
    results = []
    for i, (name, predicted, flags) in enumerate(rows):
        plan = os.path.join(work, f"plan{i}")
        run([os.path.join(BIN, "dsc"), model, "-o", plan] + flags)
        measured, lo, hi = repeated_step(plan, data, a.steps, a.repeats,
                                         os.path.join(work, f"run{i}-"))
        results.append((name, predicted, measured))
        print(f"  {i + 1:2d}. {name:60s} predicted {predicted * 1e3:8.2f} ms  measured "
              f"{measured * 1e3:8.2f} ms ({lo * 1e3:.2f}-{hi * 1e3:.2f})", flush=True)
    pred = [r[1] for r in results]
    meas = [r[2] for r in results]
    best_measured_rank = sorted(meas).index(meas[0]) + 1
    print(f"\nSpearman rank correlation, predicted against measured: {spearman(pred, meas):.2f}; "
          f"the predicted best is measured #{best_measured_rank} of {len(results)} "
          f"({100 * (meas[0] / min(meas) - 1):.1f}% from the measured best)")


if __name__ == "__main__":
    main()
