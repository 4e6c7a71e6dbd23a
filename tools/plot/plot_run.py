#!/usr/bin/python3
"""Renders a dsrt run's metrics.csv as an SVG of curves against the step.

    plot_run.py RUN [-o RUN/curves.svg] [--png] [--title TEXT]

One panel per quantity the run recorded: the loss (the training loss of
each step and, where metrics.csv has an eval_loss column, the validation
loss at the steps it was measured), the learning rate, the gradient norm
and, for fp16, the loss scale with the skipped steps marked. Non-finite
values are left out of the lines and marked at the top of their panel, so
a run that stopped on a NaN still draws what it had. With several RUNs
(`plot_run.py RUN_A RUN_B -o both.svg`) their curves share the panels,
labelled by folder name. --png also writes the same figure as PNG (next to
the SVG) with matplotlib's Agg renderer, to look at without a browser.

Uses Debian's python3-matplotlib (scripts/install-deps.sh installs it).
Prints where it wrote the figure and what it drew.
"""
import argparse
import csv
import math
import os
import sys


def read_metrics(run):
    path = os.path.join(run, "metrics.csv")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise SystemExit("plot_run: %s: %s" % (path, e.strerror))
    if not rows or "step" not in rows[0] or "loss" not in rows[0]:
        raise SystemExit("plot_run: %s: not a dsrt metrics.csv (no step and loss columns, or no "
                         "rows)" % path)
    return rows


def series(rows, column):
    """(steps, values) of a column where it has a value; non-finite values
    come back separately as steps."""
    xs, ys, bad = [], [], []
    for r in rows:
        text = (r.get(column) or "").strip()
        if not text:
            continue
        v = float(text)
        s = int(r["step"])
        if math.isfinite(v):
            xs.append(s)
            ys.append(v)
        else:
            bad.append(s)
    return xs, ys, bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN")
    ap.add_argument("-o", "--output", help="the SVG to write (default RUN/curves.svg)")
    ap.add_argument("--png", action="store_true", help="also write OUTPUT with .png")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    out = a.output or os.path.join(a.runs[0], "curves.svg")
    if not out.endswith(".svg"):
        raise SystemExit("plot_run: %s: the output must end in .svg" % out)
    for path in [out] + ([out[:-4] + ".png"] if a.png else []):
        if os.path.exists(path):
            raise SystemExit("plot_run: %s exists; plot_run never writes over a file: give "
                             "another -o" % path)
    runs = [(os.path.basename(os.path.normpath(r)), read_metrics(r)) for r in a.runs]

    import matplotlib
    matplotlib.use("Agg")
    # Text as <text>, not glyph outlines: smaller, searchable, and testable.
    matplotlib.rcParams["svg.fonttype"] = "none"
    # The same bytes for the same run (no date in the file).
    matplotlib.rcParams["svg.hashsalt"] = "dsc"
    import matplotlib.pyplot as plt

    panels = [("loss", "loss"), ("lr", "learning rate"), ("grad_norm", "gradient norm")]
    if any("loss_scale" in rows[0] for _, rows in runs):
        panels.append(("loss_scale", "loss scale (fp16)"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.4 * len(panels)), sharex=True,
                             squeeze=False)
    drawn = []
    for ax, (column, label) in zip(axes[:, 0], panels):
        for name, rows in runs:
            tag = name if len(runs) > 1 else None
            xs, ys, bad = series(rows, column)
            if column == "loss":
                ax.plot(xs, ys, lw=1.2, label=("%s train" % name) if tag else "train")
                ex, ey, ebad = series(rows, "eval_loss")
                if ex:
                    ax.plot(ex, ey, "o-", ms=3, lw=1.2,
                            label=("%s validation" % name) if tag else "validation")
                    drawn.append("%s: %d validation points" % (name, len(ex)))
                bad += ebad
            else:
                ax.plot(xs, ys, lw=1.2, label=tag)
            if column == "grad_norm" and ys and min(ys) > 0:
                ax.set_yscale("log")  # spikes of 100x stay readable
            if column == "loss_scale":
                skipped = [int(r["step"]) for r in rows if r.get("skipped") == "1"]
                if skipped:
                    ax.plot(skipped, [ys[xs.index(s)] if s in xs else float("nan")
                                      for s in skipped], "x", ms=4, color="C3",
                            label="skipped step")
                ax.set_yscale("log", base=2)
            if bad:
                top = max(ys) if ys else 1.0
                ax.plot(bad, [top] * len(bad), "v", color="C3", ms=5,
                        label="not finite")
            if column == "loss":
                drawn.append("%s: %d steps, loss %.4g -> %.4g" % (
                    name, len(rows), ys[0] if ys else float("nan"),
                    ys[-1] if ys else float("nan")))
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(a.title or " vs ".join(name for name, _ in runs))
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    wrote = [out]
    if a.png:
        fig.savefig(out[:-4] + ".png", dpi=100)
        wrote.append(out[:-4] + ".png")
    print("plot_run: %s (%s); panels: %s" % (", ".join(wrote), "; ".join(drawn),
                                             ", ".join(c for c, _ in panels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
