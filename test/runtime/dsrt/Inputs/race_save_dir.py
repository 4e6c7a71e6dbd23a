"""Two dsrt runs racing on one --save-dir: the second is always refused, and
no checkpoint tag is ever mixed.

  race_save_dir.py DSRT PLAN DATA WORK [--trials N]

Each trial starts run A (many steps, a checkpoint every few hundred), waits
until it trains (it locked the folder before its first step), starts run B
on the same folder, and checks that B exits 1 naming the lock without
writing anything, that A ends 0, and that every tag in the folder is one
run's: its index's step and tag are its name's, and each rank file's
metadata has that step.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def check_tags(folder):
    tags = [t for t in os.listdir(folder) if t.startswith("step-")]
    for tag in tags:
        step = int(tag[5:])
        index = json.load(open(os.path.join(folder, tag, "index.json")))
        if index["tag"] != tag or index["step"] != step:
            return "%s: its index is of %s (step %s)" % (tag, index["tag"], index["step"])
        for name in os.listdir(os.path.join(folder, tag)):
            if name.endswith(".safetensors"):
                meta = header(os.path.join(folder, tag, name)).get("__metadata__", {})
                if meta.get("step") != str(step):
                    return "%s/%s: step %s" % (tag, name, meta.get("step"))
    return None if tags else "no tag written"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsrt")
    ap.add_argument("plan")
    ap.add_argument("data")
    ap.add_argument("work")
    ap.add_argument("--trials", type=int, default=3)
    # Long enough that run A still trains when run B starts (B's start-up
    # is a few ms; A's run 1-2 s on the small MLP).
    ap.add_argument("--steps", type=int, default=20000)
    a = ap.parse_args()
    for trial in range(a.trials):
        ck = os.path.join(a.work, "ck%d" % trial)
        out_a = os.path.join(a.work, "a%d" % trial)
        out_b = os.path.join(a.work, "b%d" % trial)
        args = [a.plan, "--data", a.data, "--steps", str(a.steps), "--save-dir", ck,
                "--save-interval", str(max(1, a.steps // 10)), "--keep", "2"]
        run_a = subprocess.Popen([a.dsrt] + args + ["--out", out_a], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        # A prints its header after locking the folder, before its first step.
        first = run_a.stdout.readline()
        if not first.startswith("dsrt: "):
            sys.exit("race: FAIL: run A did not start: %r" % first)
        run_b = subprocess.run([a.dsrt] + args + ["--out", out_b], capture_output=True,
                               text=True)
        rest = run_a.communicate()[0]
        if run_a.returncode != 0:
            sys.exit("race: FAIL: trial %d: run A ended %d: %s" % (trial, run_a.returncode,
                                                                   rest[-500:]))
        if run_b.returncode != 1 or "another dsrt run is saving into it" not in run_b.stderr:
            sys.exit("race: FAIL: trial %d: run B was not refused (exit %d): %s"
                     % (trial, run_b.returncode, run_b.stderr[-500:]))
        if os.path.exists(os.path.join(out_b, "metrics.csv")):
            sys.exit("race: FAIL: trial %d: run B trained" % trial)
        problem = check_tags(ck)
        if problem:
            sys.exit("race: FAIL: trial %d: %s" % (trial, problem))
        shutil.rmtree(ck)
    print("race: %d trials: the second run was refused every time, no tag mixed" % a.trials)


if __name__ == "__main__":
    main()
