#!/usr/bin/env python3
"""Checks DeepSpeed monitor files against the run's metrics.csv.

    check_monitor.py RUN TRAIN_BATCH_SIZE [--csv DIR [--skip N]] [--tensorboard DIR]

The events dsrt writes are DeepSpeed's Train/Samples/train_loss, /lr and,
when metrics.csv has a loss_scale column, /loss_scale, each at the step
DeepSpeed uses, the samples trained (step x TRAIN_BATCH_SIZE), with the
value metrics.csv has in the matching column (loss, lr, loss_scale).

--csv DIR: DeepSpeed's csv_monitor files (Train_Samples_<name>.csv), read
with Python's csv module: the header `step,<name>`, then one row per step
whose value is metrics.csv's text. --skip N: the files' first N rows are an
earlier run's (a resumed run appends to them).

--tensorboard DIR: the TensorFlow event files there, read by
read_tfevents.py (CRCs checked): each starts with file_version
brain.Event:2; exactly one holds this run's steps, and its simple_value of
each tag at each step is metrics.csv's value as float32 (the field's type),
within one float32 step: metrics.csv prints the double with 9 digits, the
event rounds the double itself.

Prints one line per kind; exits 1 naming the first difference.
"""
import argparse
import csv
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import read_tfevents  # noqa: E402


def fail(msg):
    print("check_monitor: FAIL: " + msg)
    sys.exit(1)


def f32(text):
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


def ulps(a, b):
    """float32 steps between a and b (both float32 values)."""
    def key(x):
        (i,) = struct.unpack("<i", struct.pack("<f", x))
        return i if i >= 0 else -(i & 0x7FFFFFFF)
    return abs(key(a) - key(b))


def check_csv(a, rows, names):
    expected = sorted("Train_Samples_%s.csv" % k for k in names)
    present = sorted(os.listdir(a.csv))
    if present != expected:
        fail("%s holds %s, expected %s" % (a.csv, present, expected))
    for name, column in names.items():
        path = os.path.join(a.csv, "Train_Samples_%s.csv" % name)
        with open(path, newline="") as f:
            table = list(csv.reader(f))
        if not table or table[0] != ["step", name]:
            fail("%s: header %s, expected ['step', %r]" % (path, table[:1], name))
        body = table[1 + a.skip:]
        have = [m for m in rows if m[column] != ""]  # eval_loss: the evaluated steps
        if len(body) != len(have):
            fail("%s: %d rows after the %d skipped for %d steps" % (path, len(body), a.skip,
                                                                   len(have)))
        for r, m in zip(body, have):
            want = [str(int(m["step"]) * a.tbs), m[column]]
            if r != want:
                fail("%s: row %s, metrics.csv step %s says %s" % (path, r, m["step"], want))
    print("check_monitor: OK: csv %s: %d files, %d rows each match metrics.csv (step = samples, "
          "%d per step)" % (os.path.basename(os.path.normpath(a.csv)), len(names), len(rows),
                            a.tbs))


def check_tensorboard(a, rows, names):
    files = sorted(f for f in os.listdir(a.tensorboard) if f.startswith("events.out.tfevents."))
    if not files:
        fail("%s holds no events.out.tfevents.* file" % a.tensorboard)
    steps = [int(m["step"]) * a.tbs for m in rows]
    mine = []
    for name in files:
        try:
            evs = list(read_tfevents.events(os.path.join(a.tensorboard, name)))
        except ValueError as e:
            fail(str(e))
        if not evs or evs[0]["file_version"] != "brain.Event:2":
            fail("%s: the first event is not file_version brain.Event:2" % name)
        scalars = {}
        for ev in evs[1:]:
            if ev["wall_time"] is None:
                fail("%s: an event without wall_time" % name)
            for tag, value in ev["scalars"]:
                scalars.setdefault(tag, []).append((ev["step"], value))
        if sorted(s for s, _ in scalars.get("Train/Samples/train_loss", [])) == steps:
            mine.append((name, scalars))
    if len(mine) != 1:
        fail("%d event files hold this run's steps %d..%d, expected 1"
             % (len(mine), steps[0], steps[-1]))
    name, scalars = mine[0]
    tags = sorted("Train/Samples/" + k for k in names)
    if sorted(scalars) != tags:
        fail("%s: tags %s, expected %s" % (name, sorted(scalars), tags))
    for k, column in names.items():
        got = scalars["Train/Samples/" + k]
        have = [m for m in rows if m[column] != ""]  # eval_loss: the evaluated steps
        if len(got) != len(have):
            fail("%s: %d %s events for %d steps" % (name, len(got), k, len(have)))
        for (step, value), m in zip(got, have):
            want = f32(m[column])
            same = ulps(value, want) <= 1 or (value != value and want != want)
            if step != int(m["step"]) * a.tbs or not same:
                fail("%s: %s (%d, %r), metrics.csv step %s says (%d, %r)"
                     % (name, k, step, value, m["step"], int(m["step"]) * a.tbs, want))
    print("check_monitor: OK: tensorboard %s: %d event files, this run's holds %d tags x %d steps "
          "equal to metrics.csv as float32 (1 ulp)" % (os.path.basename(os.path.normpath(a.tensorboard)),
                                               len(files), len(names), len(rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("tbs", type=int)
    ap.add_argument("--csv")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--tensorboard")
    a = ap.parse_args()
    with open(os.path.join(a.run, "metrics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        fail("%s/metrics.csv has no rows" % a.run)
    names = {"train_loss": "loss", "lr": "lr"}
    if "loss_scale" in rows[0]:
        names["loss_scale"] = "loss_scale"
    if "eval_loss" in rows[0]:  # dsrt --eval-data: at the evaluated steps
        names["eval_loss"] = "eval_loss"
    if a.csv:
        check_csv(a, rows, names)
    if a.tensorboard:
        check_tensorboard(a, rows, names)


if __name__ == "__main__":
    main()
