#!/usr/bin/env python3
"""Checks DeepSpeed csv_monitor files against the run's metrics.csv.

    check_monitor.py RUN MONITOR_DIR TRAIN_BATCH_SIZE [--skip N]

MONITOR_DIR must hold DeepSpeed's files for the events dsrt writes
(Train_Samples_train_loss.csv, Train_Samples_lr.csv, and
Train_Samples_loss_scale.csv when metrics.csv has a loss_scale column),
each read with Python's csv module, as DeepSpeed's csvMonitor writes it:
the header `step,<last tag component>`, then one row per step whose step
is the samples trained (step x TRAIN_BATCH_SIZE) and whose value is the
text metrics.csv has in the matching column. --skip N: the files' first N
rows are an earlier run's (a resumed run appends to them), and the rest
must be this run's. Prints one line; exits 1 naming the first difference.
"""
import argparse
import csv
import os
import sys


def fail(msg):
    print("check_monitor: FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("monitor")
    ap.add_argument("tbs", type=int)
    ap.add_argument("--skip", type=int, default=0)
    a = ap.parse_args()
    with open(os.path.join(a.run, "metrics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    files = {"train_loss": "loss", "lr": "lr"}
    if rows and "loss_scale" in rows[0]:
        files["loss_scale"] = "loss_scale"
    expected = sorted("Train_Samples_%s.csv" % k for k in files)
    present = sorted(os.listdir(a.monitor))
    if present != expected:
        fail("%s holds %s, expected %s" % (a.monitor, present, expected))
    for name, column in files.items():
        path = os.path.join(a.monitor, "Train_Samples_%s.csv" % name)
        with open(path, newline="") as f:
            table = list(csv.reader(f))
        if not table or table[0] != ["step", name]:
            fail("%s: header %s, expected ['step', %r]" % (path, table[:1], name))
        body = table[1 + a.skip:]
        if len(body) != len(rows):
            fail("%s: %d rows after the %d skipped for %d steps" % (path, len(body), a.skip,
                                                                   len(rows)))
        for r, m in zip(body, rows):
            want = [str(int(m["step"]) * a.tbs), m[column]]
            if r != want:
                fail("%s: row %s, metrics.csv step %s says %s" % (path, r, m["step"], want))
    print("check_monitor: OK: %s: %d files, %d rows each match metrics.csv (step = samples, %d "
          "per step)" % (os.path.basename(os.path.normpath(a.monitor)), len(files), len(rows),
                         a.tbs))


if __name__ == "__main__":
    main()
