#!/usr/bin/env python3
"""Joins a run and its resumed continuation into one run folder.

    join_runs.py FIRST SECOND OUT

OUT/metrics.csv is FIRST's rows followed by SECOND's (their common columns,
step to step_time_s; the steps must continue without a gap or an overlap) and OUT/weights.safetensors
is SECOND's, so compare.py can hold the pair against a run made in one go.
"""
import os
import shutil
import sys


BASE = ["step", "loss", "lr", "grad_norm", "step_time_s"]


def rows(path):
    """The header and rows, cut to the columns every run has (a run on
    several ranks adds its communication)."""
    with open(path) as f:
        lines = f.read().splitlines()
    head = lines[0].split(",")
    if head[:len(BASE)] != BASE:
        sys.exit("join_runs: %s: header %s" % (path, lines[0]))
    cut = lambda line: ",".join(line.split(",")[:len(BASE)])  # noqa: E731
    return cut(lines[0]), [cut(line) for line in lines[1:]]


def main():
    first, second, out = sys.argv[1:4]
    h1, r1 = rows(os.path.join(first, "metrics.csv"))
    h2, r2 = rows(os.path.join(second, "metrics.csv"))
    if h1 != h2:
        sys.exit("join_runs: the metrics headers differ:\n  %s\n  %s" % (h1, h2))
    last = int(r1[-1].split(",")[0])
    nxt = int(r2[0].split(",")[0])
    if nxt != last + 1:
        sys.exit("join_runs: %s ends at step %d and %s starts at step %d" % (first, last, second, nxt))
    os.makedirs(out)
    with open(os.path.join(out, "metrics.csv"), "w") as f:
        f.write("\n".join([h1] + r1 + r2) + "\n")
    shutil.copy(os.path.join(second, "weights.safetensors"), os.path.join(out, "weights.safetensors"))
    print("join_runs: steps 1-%d from %s, %d-%s from %s" % (last, first, nxt, r2[-1].split(",")[0], second))


if __name__ == "__main__":
    main()
