#!/usr/bin/env python3
"""Compares two dsrt runs' metrics.csv step by step (the standard library
only, so that it runs on the GPU machine too):

    parity.py CPU_RUN/metrics.csv GPU_RUN/metrics.csv --loss-rtol 1e-5 [--steps N]

Fails (exit 1) when the runs have different steps, or when the loss of any
of the first N steps (all by default) differs by more than --loss-rtol
relative. Prints the largest relative loss and gradient-norm differences,
where they occur, and the differences at steps 1, 10, 50, 100, 200 (those
the runs have), so that a report can show how rounding differences grow."""
import argparse
import csv
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref")
    p.add_argument("other")
    p.add_argument("--loss-rtol", type=float, required=True)
    p.add_argument("--steps", type=int, default=0, help="check the first N steps (0: all)")
    a = p.parse_args()
    ref = list(csv.DictReader(open(a.ref)))
    oth = list(csv.DictReader(open(a.other)))
    if [r["step"] for r in ref] != [r["step"] for r in oth] or not ref:
        sys.exit(f"parity: FAIL: the runs have different steps ({len(ref)} and {len(oth)})")
    n = a.steps or len(ref)
    rel = lambda x, y: abs(float(x) - float(y)) / max(abs(float(x)), 1e-30)
    loss = [rel(r["loss"], o["loss"]) for r, o in zip(ref, oth)]
    norm = [rel(r["grad_norm"], o["grad_norm"]) for r, o in zip(ref, oth)]
    worst = max(range(n), key=lambda k: loss[k])
    print(f"parity: {len(ref)} steps; largest relative loss difference in the first {n}: "
          f"{loss[worst]:.2e} at step {worst + 1}; over all: {max(loss):.2e}; "
          f"grad norm over all: {max(norm):.2e}")
    for s in (1, 10, 50, 100, 200):
        if s <= len(ref):
            print(f"parity: step {s}: loss {ref[s - 1]['loss']} vs {oth[s - 1]['loss']} "
                  f"(relative {loss[s - 1]:.2e}), grad norm relative {norm[s - 1]:.2e}")
    if loss[worst] > a.loss_rtol:
        sys.exit(f"parity: FAIL: step {worst + 1}'s loss differs by {loss[worst]:.2e} relative "
                 f"(> {a.loss_rtol:g})")
    print(f"parity: PASS (loss within {a.loss_rtol:g} relative over the first {n} steps)")


if __name__ == "__main__":
    main()
