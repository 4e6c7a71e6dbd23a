#!/usr/bin/python3
"""Compile time and peak memory of dsc against the number of layers.

    bench/compile_time.py [--layers 12 48 96 192] [--repeat 3]
        [--dsc build/bin/dsc] [--baseline OLD_DSC [--baseline-opt OLD_DSC_OPT]]
        [--lock /tmp/dsc-build.lock] [--models DIR] [--markdown FILE]

Exports a small GPT (models/gpt.py --d-model 64 --heads 4 --vocab 256
--seq 64 --batch 8) at each layer count (kept in --models and reused: the
PyTorch export itself grows quadratically, ~5 minutes at 192 layers), then
times `dsc MODEL -o PLAN` alone: the best wall time of --repeat runs and the
largest peak RSS (the child's own ru_maxrss from wait4). dsc has no
per-pass timer, so the passes are timed separately: `dsc --emit nn` writes
the imported IR and `dsc-opt --mlir-timing` runs dsc's own registered
pipeline on it (--pipeline, default `dsc-train-pipeline`: passes/Pipeline.cpp,
the one dsc runs), whose largest entries are reported. --dsc-args adds flags
to the dsc run (then give the matching --pipeline, e.g.
'dsc-train-pipeline{dp=2 zero=3}'). A --baseline-opt older than the
registered pipeline needs the pass list spelled out (--pipeline
nn-fusion,autodiff,gradient-accumulation,optimizer,cse,memory-plan). With --baseline, an older dsc (and its dsc-opt) is
measured the same way, for a before/after table. --lock FILE holds that
flock while timing (the exports run outside it), so builds sharing the
machine do not disturb the numbers.

The goal (issue 13): 192 layers under 2.5 s, and 4x the layers at most ~4x
the time.
"""
import argparse
import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import BIN, PY, REPO, report, run  # noqa: E402

MODEL = ["--d-model", "64", "--heads", "4", "--vocab", "256", "--seq", "64", "--batch", "8"]
PIPELINE = "dsc-train-pipeline"


def export(models, layers):
    """The GPT with `layers` layers, exported once into `models`."""
    path = os.path.join(models, "gpt-d64-L%d.onnx" % layers)
    if not os.path.exists(path):
        t = time.time()
        run([PY, os.path.join(REPO, "models", "gpt.py"), "--layers", str(layers), *MODEL,
             "-o", path + ".part"])
        os.replace(path + ".part", path)
        print("exported %d layers in %.0f s" % (layers, time.time() - t), flush=True)
    return path


def timed(cmd):
    """(wall seconds, peak RSS in bytes) of one run of `cmd`."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(cmd), err.decode(errors="replace")))
    return wall, usage.ru_maxrss * 1024


def passes(dsc, dsc_opt, model, pipeline, work):
    """[(seconds, name)] of the passes, the largest first, from dsc-opt
    --mlir-timing over dsc's imported IR (dsc-opt's own parsing and printing
    left out)."""
    nn = os.path.join(work, "nn.mlir")
    if os.path.exists(nn):
        os.remove(nn)
    run([dsc, model, "--emit", "nn", "-o", nn])
    r = subprocess.run([dsc_opt, nn, "--pass-pipeline=builtin.module(%s)" % pipeline,
                        "--mlir-timing", "-o", os.devnull], capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench: dsc-opt failed:\n" + r.stderr)
    out = []
    for line in r.stderr.splitlines():
        m = re.match(r"\s*([0-9.]+) \(\s*[0-9.]+%\)\s+(\S.*)$", line)
        if m and m.group(2) not in ("Total", "Rest", "Parser", "Output") \
                and not m.group(2).startswith("("):
            out.append((float(m.group(1)), m.group(2)))
    return sorted(out, reverse=True)


def measure(label, dsc, dsc_opt, models, a, work):
    rows = []
    for layers in a.layers:
        model = models[layers]
        plan = os.path.join(work, "plan")
        walls, rss = [], 0
        for _ in range(a.repeat):
            shutil.rmtree(plan, ignore_errors=True)
            wall, peak = timed([dsc, model, *shlex.split(a.dsc_args), "-o", plan])
            walls.append(wall)
            rss = max(rss, peak)
        arena = ""
        with open(os.path.join(plan, "manifest.txt")) as f:
            m = re.search(r"^arena:\s+(\d+) bytes", f.read(), re.M)
            arena = m.group(1) if m else "?"
        top = passes(dsc, dsc_opt, model, a.pipeline, work) if dsc_opt else []
        rows.append(dict(layers=layers, wall=min(walls), rss=rss, arena=arena, top=top))
        print("%s: %3d layers: %.2f s, peak RSS %.0f MiB, arena %s bytes; %s" % (
            label, layers, min(walls), rss / 2**20, arena,
            ", ".join("%s %.3f s" % (n, s) for s, n in top[:3])), flush=True)
    return rows


def table(label, rows):
    lines = ["| dsc | layers | compile (s) | ms / layer | peak RSS (MiB) | arena (bytes) | "
             "passes (s) | largest passes (s, share of the passes) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        total = sum(s for s, _ in r["top"])
        top = ", ".join("%s %.3f (%.0f%%)" % (n, s, 100 * s / (total or 1))
                        for s, n in r["top"][:3])
        lines.append("| %s | %d | %.2f | %.1f | %.0f | %s | %s | %s |" % (
            label, r["layers"], r["wall"], 1000 * r["wall"] / r["layers"], r["rss"] / 2**20,
            r["arena"], "%.2f" % total if r["top"] else "", top))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[12, 48, 96, 192])
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the best time counts")
    ap.add_argument("--dsc", default=os.path.join(BIN, "dsc"))
    ap.add_argument("--dsc-opt", help="default: dsc-opt beside --dsc")
    ap.add_argument("--dsc-args", default="", help="extra dsc flags, e.g. '--dp 2 --zero 3'")
    ap.add_argument("--pipeline", default=PIPELINE,
                    help="pipeline dsc-opt times (default: dsc's registered single-rank pipeline)")
    ap.add_argument("--baseline", help="an older dsc to measure the same way")
    ap.add_argument("--baseline-opt", help="its dsc-opt (default: none, no pass times)")
    ap.add_argument("--models", default=os.path.join(tempfile.gettempdir(),
                                                     "dsc-compile-time-models"))
    ap.add_argument("--lock", help="flock held while timing (e.g. /tmp/dsc-build.lock)")
    ap.add_argument("--markdown", help="also write the table to this file")
    a = ap.parse_args()
    dsc_opt = a.dsc_opt or os.path.join(os.path.dirname(os.path.abspath(a.dsc)), "dsc-opt")
    if not os.path.exists(dsc_opt):
        dsc_opt = None

    os.makedirs(a.models, exist_ok=True)
    models = {n: export(a.models, n) for n in a.layers}
    lock = open(a.lock, "a") if a.lock else None
    with tempfile.TemporaryDirectory(prefix="dsc-compile-time-") as work:
        if lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            runs = []
            if a.baseline:
                runs.append(("before", measure("before", a.baseline, a.baseline_opt, models, a,
                                               work)))
            runs.append(("after" if a.baseline else "dsc",
                         measure("dsc", a.dsc, dsc_opt, models, a, work)))
        finally:
            if lock:
                fcntl.flock(lock, fcntl.LOCK_UN)
    text = ("GPT d 64, 4 heads, vocab 256, seq 64, batch 8; %s; best of %d runs; "
            "peak RSS of the dsc process\n\n" % (
                "dsc " + a.dsc_args if a.dsc_args else "dsc MODEL -o PLAN", a.repeat))
    text += "\n\n".join(table(label, rows) for label, rows in runs) + "\n"
    report(text, a.markdown)


if __name__ == "__main__":
    main()
