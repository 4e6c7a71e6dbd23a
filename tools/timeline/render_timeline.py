#!/usr/bin/python3
"""Renders dsrt --timeline files as an SVG Gantt chart, one row per rank.

    render_timeline.py RUN [-o RUN/timeline.svg]

Reads RUN/timeline.rank-*.csv (rank,list,micro,index,op,start_us,end_us
and, from dsrt's pipeline runtime on, mb,phase; one step of every rank, on
the system clock shared by the ranks of a machine). Each instruction is a
box on its rank's row, coloured by what it does: waiting for communication
(dist.wait: time the rank could not compute), the forward, backward and
weight-gradient phases of a pipeline's micro-batches, starting a collective
or a message (other dist.*), the optimizer (train.*) and other compute.
Boxes of a pipeline phase wide enough are labelled with their micro-batch
(F3: forward of micro-batch 3, B3 backward, W3 weight gradient).

Prints, per rank, the step time and the share of it spent in dist.wait;
for a pipeline (instructions with a phase), also each rank's and the
overall bubble fraction: 1 - (time in compute instructions of phases 1-3,
dist.* excluded) / (the step's span from the first start to the last end
over all ranks). Standard library only.
"""
import argparse
import csv
import glob
import html
import os
import sys

PHASES = {1: "F", 2: "B", 3: "W"}

# (name, colour, legend), in the order a box is classified.
CATEGORIES = [("wait", "#d62728", "waiting for communication (dist.wait)"),
              ("forward", "#1f77b4", "forward (phase 1)"),
              ("backward", "#9467bd", "backward (phase 2)"),
              ("wgrad", "#17becf", "weight gradient (phase 3)"),
              ("comm", "#ff7f0e", "starting a collective / message, chunk (dist.*)"),
              ("optimizer", "#2ca02c", "optimizer, clipping, lr (train.*)"),
              ("other", "#7f7f7f", "other compute (nn.*, accumulate, fill, load_batch)")]
COLOUR = {name: colour for name, colour, _ in CATEGORIES}


def category(op, phase):
    if op == "dist.wait":
        return "wait"
    if op.startswith("dist."):
        return "comm"
    if phase == 1:
        return "forward"
    if phase == 2:
        return "backward"
    if phase == 3:
        return "wgrad"
    if op.startswith("train."):
        return "optimizer"
    return "other"


def is_compute(op, phase):
    """Useful work of a pipeline: phases 1-3 without communication."""
    return phase in PHASES and not op.startswith("dist.")


def read(files):
    ranks = {}
    for f in files:
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                ranks.setdefault(int(row["rank"]), []).append(
                    (row["op"], row["list"], int(row["micro"]), int(row["index"]),
                     int(row["start_us"]), int(row["end_us"]),
                     int(row.get("mb") or 0), int(row.get("phase") or 0)))
    return ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.run, "timeline.rank-*.csv")))
    if not files:
        sys.exit("render_timeline: no %s/timeline.rank-*.csv (run dsrt with --timeline)" % a.run)
    ranks = read(files)
    t0 = min(e[4] for evs in ranks.values() for e in evs)
    t1 = max(e[5] for evs in ranks.values() for e in evs)
    span = max(t1 - t0, 1)
    pipeline = any(e[7] in PHASES for evs in ranks.values() for e in evs)
    width, left, row_h, top = 1200, 90, 28, 40
    height = top + row_h * len(ranks) + 40 + 18 * len(CATEGORIES)
    scale = (width - left - 20) / span
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, height),
           '<text x="%d" y="20">dsrt timeline: one step, %.1f ms</text>' % (left, span / 1000)]
    total_compute = 0
    for r, (rank, evs) in enumerate(sorted(ranks.items())):
        y = top + r * row_h
        out.append('<text x="5" y="%d">rank %d</text>' % (y + row_h * 0.65, rank))
        waited = sum(e[5] - e[4] for e in evs if e[0] == "dist.wait")
        busy = max(e[5] for e in evs) - min(e[4] for e in evs)
        line = ("rank %d: step %.1f ms, %.1f%% waiting for collectives"
                % (rank, busy / 1000, 100.0 * waited / max(busy, 1)))
        if pipeline:
            compute = sum(e[5] - e[4] for e in evs if is_compute(e[0], e[7]))
            total_compute += compute
            line += ", bubble fraction %.3f" % (1.0 - compute / span)
        print(line)
        labels = []
        for op, lst, micro, index, s, e, mb, phase in evs:
            x, w = left + (s - t0) * scale, max((e - s) * scale, 0.5)
            out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s">'
                       '<title>%s %s[%d] #%d: %.3f ms%s</title></rect>'
                       % (x, y + 3, w, row_h - 6, COLOUR[category(op, phase)], html.escape(op),
                          lst, micro, index, (e - s) / 1000,
                          " (%s%d)" % (PHASES[phase], mb) if phase in PHASES else ""))
            if phase in PHASES and not op.startswith("dist."):
                label = "%s%d" % (PHASES[phase], mb)
                if w >= 7 * len(label) + 4:
                    labels.append('<text x="%.2f" y="%d" fill="white" text-anchor="middle">%s'
                                  '</text>' % (x + w / 2, y + row_h * 0.65, label))
        out.extend(labels)  # above every box of the row
    if pipeline:
        print("overall: bubble fraction %.3f (%d ranks, step span %.1f ms)"
              % (1.0 - total_compute / (len(ranks) * span), len(ranks), span / 1000))
    y = top + len(ranks) * row_h + 20
    for k, (_, c, label) in enumerate(CATEGORIES):
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (left, y + 18 * k, c))
        out.append('<text x="%d" y="%d">%s</text>' % (left + 18, y + 18 * k + 11, label))
    out.append("</svg>")
    path = a.output or os.path.join(a.run, "timeline.svg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("render_timeline: %d ranks -> %s" % (len(ranks), path))


if __name__ == "__main__":
    main()
