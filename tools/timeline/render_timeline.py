#!/usr/bin/python3
"""Renders dsrt --timeline files as an SVG Gantt chart, one row per rank.

    render_timeline.py RUN [-o RUN/timeline.svg]

Reads RUN/timeline.rank-*.csv (rank,list,micro,index,op,start_us,end_us; one
step of every rank, on the system clock shared by the ranks of a machine).
Each instruction is a box on its rank's row, coloured by what it does:
compute (nn.*), the optimizer (train.*), starting a collective (dist.*
other than wait) and waiting for one (dist.wait: time the rank could not
compute). Prints, per rank, the step time and the share of it spent in
dist.wait. Standard library only.
"""
import argparse
import csv
import glob
import html
import os
import sys

COLOURS = [("dist.wait", "#d62728", "waiting for a collective"),
           ("dist.", "#ff7f0e", "starting a collective / chunk"),
           ("train.", "#2ca02c", "optimizer, clipping, lr"),
           ("", "#1f77b4", "compute (nn.*, accumulate, fill)")]


def colour(op):
    for prefix, c, _ in COLOURS:
        if op.startswith(prefix):
            return c
    return COLOURS[-1][1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.run, "timeline.rank-*.csv")))
    if not files:
        sys.exit("render_timeline: no %s/timeline.rank-*.csv (run dsrt with --timeline)" % a.run)
    ranks = {}
    for f in files:
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                ranks.setdefault(int(row["rank"]), []).append(
                    (row["op"], row["list"], int(row["micro"]), int(row["index"]),
                     int(row["start_us"]), int(row["end_us"])))
    t0 = min(e[4] for evs in ranks.values() for e in evs)
    t1 = max(e[5] for evs in ranks.values() for e in evs)
    span = max(t1 - t0, 1)
    width, left, row_h, top = 1200, 90, 28, 40
    height = top + row_h * len(ranks) + 40 + 18 * len(COLOURS)
    scale = (width - left - 20) / span
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, height),
           '<text x="%d" y="20">dsrt timeline: one step, %.1f ms</text>' % (left, span / 1000)]
    for r, (rank, evs) in enumerate(sorted(ranks.items())):
        y = top + r * row_h
        out.append('<text x="5" y="%d">rank %d</text>' % (y + row_h * 0.65, rank))
        waited = sum(e[5] - e[4] for e in evs if e[0] == "dist.wait")
        busy = max(e[5] for e in evs) - min(e[4] for e in evs)
        print("rank %d: step %.1f ms, %.1f%% waiting for collectives"
              % (rank, busy / 1000, 100.0 * waited / max(busy, 1)))
        for op, lst, micro, index, s, e in evs:
            x, w = left + (s - t0) * scale, max((e - s) * scale, 0.5)
            out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s">'
                       '<title>%s %s[%d] #%d: %.3f ms</title></rect>'
                       % (x, y + 3, w, row_h - 6, colour(op), html.escape(op), lst, micro,
                          index, (e - s) / 1000))
    y = top + len(ranks) * row_h + 20
    for k, (_, c, label) in enumerate(COLOURS):
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (left, y + 18 * k, c))
        out.append('<text x="%d" y="%d">%s</text>' % (left + 18, y + 18 * k + 11, label))
    out.append("</svg>")
    path = a.output or os.path.join(a.run, "timeline.svg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("render_timeline: %d ranks -> %s" % (len(ranks), path))


if __name__ == "__main__":
    main()
