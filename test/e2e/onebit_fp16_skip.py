#!/usr/bin/env python3
"""fp16 1-bit Adam: a step skipped in the compressed phase changes nothing.

    onebit_fp16_skip.py DSRT PLAN DATA RUN WORKDIR

RUN is a finished dsrt run of PLAN (fp16, several data-parallel ranks) whose
metrics.csv has the comm_bytes and skipped columns. Finds the first step
that was skipped in the compressed phase (a step moving less than 1/16 of
step 1's bytes), trains PLAN again to the step before it and to it, saving
a checkpoint each time, and checks with same_state.py that the two hold
bitwise the same state on every rank (weights, moments, and the 1-bit
worker and server errors, which must be nonzero by then): DeepSpeed does
not call the optimizer on an overflow, so the compressed all-reduce leaves
its errors as they were. Which steps overflow depends on the data and the
CPU's fp16 rounding, so the step is found, not assumed.
"""
import csv
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("onebit_fp16_skip: FAIL: " + msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 6:
        fail("usage: onebit_fp16_skip.py DSRT PLAN DATA RUN WORKDIR")
    dsrt, plan, data, run, work = sys.argv[1:]
    rows = list(csv.DictReader(open(os.path.join(run, "metrics.csv"))))
    first = float(rows[0]["comm_bytes"])
    compressed = [r for r in rows if float(r["comm_bytes"]) * 16 <= first]
    if not compressed:
        fail("no step of %s ran the compressed phase" % run)
    skipped = [int(r["step"]) for r in compressed if r["skipped"] == "1"]
    if not skipped:
        fail("no compressed-phase step of %s overflowed (steps %s-%s): raise the loss scale"
             % (run, compressed[0]["step"], compressed[-1]["step"]))
    k = skipped[0]
    dirs = []
    for steps in (k - 1, k):
        out = os.path.join(work, "to%d" % steps)
        subprocess.run([dsrt, plan, "--data", data, "--steps", str(steps), "--save-dir",
                        out + ".ck", "--out", out], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        dirs.append(out + ".ck")
    res = subprocess.run([sys.executable, os.path.join(HERE, "same_state.py"), dirs[0], dirs[1],
                          "--nonzero", "_error"], capture_output=True, text=True)
    if res.returncode:
        fail("step %d was skipped but changed the state: %s" % (k, res.stdout.strip()))
    print("onebit_fp16_skip: OK: %d compressed-phase steps skipped (first: step %d); %s"
          % (len(skipped), k, res.stdout.strip().replace("same_state: OK: ", "")))


if __name__ == "__main__":
    main()
