#!/usr/bin/python3
"""Draws each rank's memory over one step against the plan, from dsrt --timeline.

    plot_memory.py RUN [-o RUN/memory.svg] [--png] [--title TEXT]

Reads RUN/timeline.rank-*.csv (dsrt --timeline: every instruction of the
last step, per rank, with planned_bytes, arena_bytes and rss_bytes). One
panel per rank, against the time into the step:

  * planned: the arena bytes the memory plan has in use at each
    instruction (the model state, plus the activations live there, their
    byte ranges merged), the line the plan promised;
  * arena: the rank's one allocation, the planned peak (dsc --explain);
  * measured: the process's resident set after each instruction (right
    axis; it also holds the binary, the libraries and the communication
    buffers, so it sits above the arena by what the plan does not cover).

Writes RUN/memory.svg (never over a file), --png also a PNG beside it, and
prints per rank the planned peak, the arena and the resident set's range.
Uses Debian's python3-matplotlib.
"""
import argparse
import csv
import glob
import os
import re
import sys

MIB = 1024.0 * 1024.0


def read_rank(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = ("start_us", "end_us", "planned_bytes", "arena_bytes", "rss_bytes")
    if not rows or any(k not in rows[0] for k in need):
        raise SystemExit("plot_memory: %s: no %s columns (a timeline from an older dsrt?)"
                         % (path, ", ".join(need)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("-o", "--output")
    ap.add_argument("--png", action="store_true")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(a.run, "timeline.rank-*.csv")),
                   key=lambda p: int(re.search(r"rank-(\d+)", p).group(1)))
    if not files:
        raise SystemExit("plot_memory: %s has no timeline.rank-*.csv (run dsrt with --timeline)"
                         % a.run)
    out = a.output or os.path.join(a.run, "memory.svg")
    outs = [out] + ([os.path.splitext(out)[0] + ".png"] if a.png else [])
    for o in outs:
        if os.path.exists(o):
            raise SystemExit("plot_memory: %s exists; plot_memory never writes over a file: give "
                             "another -o" % o)
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    ranks = [(int(re.search(r"rank-(\d+)", p).group(1)), read_rank(p)) for p in files]
    fig, axes = plt.subplots(len(ranks), 1, figsize=(9, 2.6 * len(ranks)), squeeze=False)
    lines = []
    for ax, (rank, rows) in zip(axes[:, 0], ranks):
        t0 = min(int(r["start_us"]) for r in rows)
        xs = [(int(r["end_us"]) - t0) / 1000.0 for r in rows]
        planned = [int(r["planned_bytes"]) / MIB for r in rows]
        arena = int(rows[0]["arena_bytes"]) / MIB
        rss = [int(r["rss_bytes"]) / MIB for r in rows]
        ax.step(xs, planned, where="post", color="C0", lw=1.2, label="planned (in use)")
        ax.axhline(arena, color="C0", ls="--", lw=1, label="arena (planned peak)")
        ax.set_ylabel("arena MiB")
        ax.set_ylim(0, arena * 1.15 if arena > 0 else 1)
        ax.set_title("rank %d" % rank, fontsize=9, loc="left")
        right = ax.twinx()
        right.plot(xs, rss, color="C3", lw=1.0, label="measured resident set")
        right.set_ylabel("resident MiB", color="C3")
        lo, hi = min(rss), max(rss)
        right.set_ylim(max(0.0, lo - 0.1 * (hi - lo + 1)), hi + 0.1 * (hi - lo + 1))
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = right.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower center", ncol=3)
        lines.append("rank %d: planned peak %.2f MiB in use of an arena of %.2f MiB, resident "
                     "set %.1f-%.1f MiB over %d instructions"
                     % (rank, max(planned), arena, lo, hi, len(rows)))
    axes[-1, 0].set_xlabel("ms into the step (the last step, dsrt --timeline)")
    fig.suptitle(a.title or "memory over one step: the plan and the process", fontsize=10)
    fig.tight_layout()
    for o in outs:
        fig.savefig(o)
    print("plot_memory: %s; %s" % (", ".join(outs), "; ".join(lines)))


if __name__ == "__main__":
    main()
