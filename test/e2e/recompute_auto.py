#!/usr/bin/env python3
"""--recompute auto, end to end (issue 13).

  recompute_auto.py DSC DSRT MODEL.onnx CONFIG DATA WORK

Compiles MODEL without recompute and with --recompute layers, reads both
planned peaks (the arenas in manifest.txt), then asks --recompute auto for
a budget halfway between them and checks, printing one line each:

  halfway   auto's plan fits the budget, recomputes fewer flops than
            layers (the issue's goal: faster than layers at that budget),
            and trains bitwise as the plan without recompute (6 steps);
  too-small a budget one byte under the layers plan's peak is refused with
            the smallest reachable peak named.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import read_metrics, read_safetensors  # noqa: E402


def fail(msg):
    print("recompute_auto: FAIL: " + msg)
    sys.exit(1)


def compile_plan(dsc, model, config, out, *flags):
    r = subprocess.run([dsc, model, "--config", config, "-o", out, *flags],
                       capture_output=True, text=True)
    return r


def manifest(out):
    text = open(os.path.join(out, "manifest.txt")).read()
    arena = int(re.search(r"arena: +(\d+)", text).group(1))
    m = re.search(r"recompute: +\w+: (\d+) forward ops recomputed per micro-batch, ([\d.]+) GFLOP",
                  text)
    return arena, (float(m.group(2)) if m else 0.0)


def main():
    dsc, dsrt, model, config, data, work = sys.argv[1:7]
    r = compile_plan(dsc, model, config, os.path.join(work, "none"), "--recompute", "none")
    if r.returncode:
        fail(r.stderr)
    none_peak, _ = manifest(os.path.join(work, "none"))
    r = compile_plan(dsc, model, config, os.path.join(work, "layers"), "--recompute", "layers")
    if r.returncode:
        fail(r.stderr)
    layers_peak, layers_flops = manifest(os.path.join(work, "layers"))
    if not layers_peak < none_peak:
        fail("layers does not lower the peak: %d vs %d" % (layers_peak, none_peak))

    budget = (none_peak + layers_peak) // 2
    out = os.path.join(work, "auto")
    r = compile_plan(dsc, model, config, out, "--recompute", "auto", "--memory-budget", str(budget))
    if r.returncode:
        fail(r.stderr)
    note = [l for l in r.stderr.splitlines() if "--recompute auto:" in l]
    if not note:
        fail("no note says what auto chose:\n" + r.stderr)
    peak, flops = manifest(out)
    if peak > budget:
        fail("auto's plan peaks at %d > budget %d" % (peak, budget))
    if not flops < layers_flops:
        fail("auto recomputes %.6f GFLOP, layers %.6f" % (flops, layers_flops))
    runs = {}
    for name in ("none", "auto"):
        run = os.path.join(work, "run-" + name)
        subprocess.run([dsrt, os.path.join(work, name), "--data", data, "--steps", "6", "--out", run],
                       check=True, stdout=subprocess.DEVNULL)
        runs[name] = (read_metrics(os.path.join(run, "metrics.csv")),
                      read_safetensors(os.path.join(run, "weights.safetensors")))
    if [x["loss"] for x in runs["none"][0]] != [x["loss"] for x in runs["auto"][0]]:
        fail("auto's losses differ from the plan without recompute")
    for k, w in runs["none"][1].items():
        if w.tobytes() != runs["auto"][1][k].tobytes():
            fail("weight %s differs" % k)
    print("recompute_auto: halfway: budget %d between %d (none) and %d (layers): %s; peak %d, "
          "%.6f GFLOP recomputed (layers: %.6f); bitwise the run without recompute"
          % (budget, none_peak, layers_peak, note[0].split("auto: ")[1].split(":")[0], peak,
             flops, layers_flops))

    r = compile_plan(dsc, model, config, os.path.join(work, "small"), "--recompute", "auto",
                     "--memory-budget", str(layers_peak - 1))
    expect = "the smallest planned peak is %d bytes" % layers_peak
    if r.returncode == 0 or expect not in r.stderr:
        fail("a budget under every plan was not refused as expected:\n" + r.stderr)
    if os.path.exists(os.path.join(work, "small")):
        fail("a refused compile left a plan behind")
    print("recompute_auto: too-small: refused, naming the smallest peak %d" % layers_peak)
    print("recompute_auto: OK")


if __name__ == "__main__":
    main()
