#!/usr/bin/python3
"""Pipeline bubble: measured from dsrt --timeline against the prediction.

    bench/pipeline_bubble.py [--build build] [--work /tmp/dsc-bubble]
        [--stages 2] [--micro-batches 4 8] [--layers 8] [--steps 6]

Compiles a GPT (d 128, seq 64, micro-batch 8, byte vocabulary; dropout 0)
for `--stages` pipeline stages with each schedule (1f1b, zb-h1) and each M,
runs it on local ranks (one thread each) with --timeline, and reports per
run: the theoretical 1F1B bubble (P-1)/(M+P-1), dsc's predicted bubble (its
schedule replayed with the ops' costs), the bubble measured from the last
step's timeline (1 - compute in F/B/W instructions / step span, over all
ranks; tools/timeline/render_timeline.py) and the step time. The SVG of
each run is left in WORK/RUN/timeline.svg. Use as many stages as the
machine has cores: oversubscribed ranks share a core, which distorts the
timeline.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import report, run  # noqa: E402

ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/dsc-bubble")
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--markdown", help="also write the table to this file")
    a = ap.parse_args()
    bin_ = os.path.join(a.build, "bin")
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt.onnx")
    run(["/usr/bin/python3", os.path.join(ROOT, "models", "gpt.py"), "--size", "tiny",
         "--layers", str(a.layers), "--d-model", "128", "--heads", "4", "--vocab", "256",
         "--seq", "64", "--batch", "8", "--dropout", "0", "-o", model])
    P = a.stages
    rows = ["| schedule | P | M | theory (P-1)/(M+P-1) | dsc predicted | measured | step ms |",
            "|---|---|---|---|---|---|---|"]
    for m in a.micro_batches:
        for sched in ("1f1b", "zb-h1"):
            name = "p%d-m%d-%s" % (P, m, sched)
            plan = os.path.join(a.work, name + ".plan")
            out = os.path.join(a.work, name)
            explain = subprocess.run(
                [os.path.join(bin_, "dsc"), model, "--pp", str(P), "--micro-batches", str(m),
                 "--schedule", sched, "-o", plan, "--explain"],
                check=True, capture_output=True, text=True).stdout
            predicted = float(re.search(r"predicted bubble: ([0-9.]+)%", explain).group(1))
            subprocess.run(["rm", "-rf", out], check=True)
            run([os.path.join(bin_, "dsrt"), plan, "--steps", str(a.steps), "--timeline",
                 "--threads", "1", "--out", out])
            text = subprocess.run(
                ["/usr/bin/python3", os.path.join(ROOT, "tools", "timeline", "render_timeline.py"),
                 out], check=True, capture_output=True, text=True).stdout
            g = re.search(r"overall: bubble fraction ([0-9.]+) \(\d+ ranks, step span ([0-9.]+) ms",
                          text)
            rows.append("| %s | %d | %d | %.1f%% | %.1f%% | %.1f%% | %.0f |" % (
                sched, P, m, 100.0 * (P - 1) / (m + P - 1), predicted, 100 * float(g.group(1)),
                float(g.group(2))))
    report("\n".join(rows), a.markdown)


if __name__ == "__main__":
    main()
