#!/usr/bin/python3
"""dsrt --max-restarts on one machine: a rank killed mid-run, the run goes on
from the newest checkpoint, and what it trains after the restart equals, bit
for bit, a run started from that checkpoint on the layout it restarted on.

    elastic_restart.py --dsc DSC --dsrt DSRT --plan PLAN --plain-plan PLAN2 --data TOKENS --work DIR

PLAN is compiled for dp 4 with an elasticity section (PLAN/elastic/dp2
beside it). Cases, one line each:
  same-ranks  no hostfile: rank 2 killed at step >= KILL_AT; the same 4
              ranks restart with the same plan; the losses after the
              restart equal an uninterrupted run's, and so do the weights.
  elastic     hostfile 'localhost slots=2' + '127.0.0.1 slots=2' (two names
              of this machine, as two hosts): rank 2, on 127.0.0.1, killed;
              the run goes on without that host on PLAN/elastic/dp2, and
              equals `dsrt PLAN/elastic/dp2 --resume CHECKPOINT`.
  no-fit      the same with --plain-plan, compiled without elasticity: the
              2 slots left hold no plan of the job, and dsrt says so.
Each case also requires that no process of either attempt is left.
"""
import argparse
import csv
import filecmp
import os
import re
import signal
import subprocess
import sys
import time

STEPS = 100
KILL_AT = 12


def fail(what):
    print("elastic-restart: FAIL: " + what)
    sys.exit(1)


def rows(run):
    with open(os.path.join(run, "metrics.csv")) as f:
        return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in csv.DictReader(f)]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def rank_pids(run):
    """The pids the ranks of a run folder (and its restarts) recorded."""
    pids = []
    for root, _, files in os.walk(run):
        if os.path.basename(root) == "ranks":
            for name in files:
                if name.endswith(".pid"):
                    with open(os.path.join(root, name)) as f:
                        pids.append(int(f.read().split()[0]))
    return pids


def killed_run(args, name, extra, victim, plan=None, ok=True):
    """Starts the run, kills rank `victim` once KILL_AT steps are done;
    returns (dsrt's output, the run folder)."""
    run = os.path.join(args.work, name)
    cmd = [args.dsrt, plan or args.plan, "--data", args.data, "--steps", str(STEPS), "--save-dir",
           os.path.join(args.work, name + "-ck"), "--save-interval", "5", "--max-restarts", "1",
           "--threads", "1", "--out", run] + extra
    log = open(os.path.join(args.work, name + ".log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < 120:
        try:
            if len(rows(run)) >= KILL_AT:
                break
        except (OSError, KeyError):
            pass
        time.sleep(0.01)
    pid_file = os.path.join(run, "ranks", "%d.pid" % victim)
    if proc.poll() is not None or not os.path.exists(pid_file):
        fail("%s: the run ended before its rank %d could be killed" % (name, victim))
    os.kill(int(open(pid_file).read().split()[0]), signal.SIGKILL)
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("%s: dsrt still runs 300 s after the kill" % name)
    log.close()
    text = open(os.path.join(args.work, name + ".log")).read()
    if (proc.returncode == 0) != ok:
        fail("%s: dsrt exited with %d:\n%s" % (name, proc.returncode, text))
    left = [p for p in rank_pids(run) if alive(p)]
    if left:
        fail("%s: rank processes left: %s" % (name, left))
    return text, run


def restart_line(name, text):
    m = re.search(r"^dsrt: restart 1 of 1: (.*from checkpoint (\S+) \(step (\d+)\))$", text,
                  re.M)
    if not m:
        fail("%s: no restart line in:\n%s" % (name, text))
    return m.group(1), m.group(2), int(m.group(3))


def compare(name, run, ref, step):
    after = rows(os.path.join(run, "restart-1"))
    want = [r for r in rows(ref) if int(r[0]) > step]
    if after != want:
        fail("%s: the losses after the restart differ from the reference's" % name)
    if len(after) != STEPS - step:
        fail("%s: %d steps after the restart, expected %d" % (name, len(after), STEPS - step))
    if not filecmp.cmp(os.path.join(run, "restart-1", "weights.safetensors"),
                       os.path.join(ref, "weights.safetensors"), shallow=False):
        fail("%s: the final weights differ from the reference's" % name)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--dsc", "--dsrt", "--plan", "--plain-plan", "--data", "--work"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    # Same ranks: against the uninterrupted run.
    text, run = killed_run(args, "same", [], 2)
    what, ckpt, step = restart_line("same-ranks", text)
    if not re.search(r"^dsrt: rank 2 on localhost was killed by signal 9", text, re.M):
        fail("same-ranks: the kill is not named:\n" + text)
    ref = os.path.join(args.work, "same-ref")
    subprocess.run([args.dsrt, args.plan, "--data", args.data, "--steps", str(STEPS),
                    "--threads", "1", "--out", ref], check=True, capture_output=True)
    compare("same-ranks", run, ref, step)
    print("elastic-restart: same-ranks: %s" % re.sub(r"\S*/(\S+-ck/)", r"\1", what))
    print("elastic-restart: same-ranks: steps %d-%d bitwise equal to the uninterrupted run"
          % (step + 1, STEPS))

    # Elastic: one "host" lost, dp 2 on the other.
    hosts = os.path.join(args.work, "hosts")
    with open(hosts, "w") as f:
        f.write("localhost slots=2\n127.0.0.1 slots=2\n")
    text, run = killed_run(args, "elastic", ["--hostfile", hosts], 2)
    what, ckpt, step = restart_line("elastic", text)
    if not re.search(r"^dsrt: rank 2 on 127\.0\.0\.1 was killed by signal 9", text, re.M):
        fail("elastic: the kill is not named:\n" + text)
    ref = os.path.join(args.work, "elastic-ref")
    subprocess.run([args.dsrt, os.path.join(args.plan, "elastic", "dp2"), "--data", args.data,
                    "--steps", str(STEPS), "--threads", "1", "--resume", ckpt, "--out", ref],
                   check=True, capture_output=True)
    compare("elastic", run, ref, step)
    print("elastic-restart: elastic: %s" % re.sub(r"\S*/(\S+-ck/)", r"\1", what)
          .replace(args.plan, "PLAN"))
    print("elastic-restart: elastic: steps %d-%d bitwise equal to PLAN/elastic/dp2 resumed "
          "from step %d" % (step + 1, STEPS, step))

    # A plan without elastic sizes: nothing fits the 2 slots left.
    text, run = killed_run(args, "no-fit", ["--hostfile", hosts], 2, plan=args.plain_plan,
                           ok=False)
    last = text.strip().splitlines()[-1]
    print("elastic-restart: no-fit: " + last.replace(run, "RUN"))
    print("elastic-restart: OK")


if __name__ == "__main__":
    main()
