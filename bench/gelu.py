#!/usr/bin/python3
"""dsrt's erf GELU forward and backward next to PyTorch's, in one run.

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/gelu.py [--threads 2] [--rounds 3] [--markdown FILE]

On an R x C tensor (default 1024 x 1536, the MLP activation of the issue-12
GPT: 1024 tokens x 4 d) of N(0, 1) inputs, in fp32, bf16 and fp16: dsrt's
unary(GeluErf) and geluGrad (build/bin/dsrt_gelu_bench,
test/runtime/kernels/GeluBench.cpp, which also times the tanh variants)
and PyTorch's aten gelu / gelu_backward kernels with approximate='none'
(what torch.nn.functional.gelu and its autograd backward call), with the same
thread count (torch.set_num_threads) and denormals flushed in both. PyTorch
gets the better of its out= overload (no allocation) and the allocating call,
timed in a fresh process each round: gelu_backward's speed varies by up to 2x
from process to process here (0.7 or 1.3 ms; likely the relative addresses
of x, dy and dx), and the best round is what the table keeps.

Every figure is the best of --reps timed repetitions (each about --ms
milliseconds of back-to-back calls); dsrt and PyTorch alternate --rounds
times and each figure is its best round, so a busy spell favours neither.
--compare DIR times a second build's dsrt_gelu_bench (say, of an earlier
commit) in the same rounds, as the "before" columns. PyTorch 1.13 has no CPU
gelu for fp16 ("-").
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, best_ms, pytorch_blas, report, run, timing_args  # noqa: E402

DTYPES = ["fp32", "bf16", "fp16"]


def torch_ms(torch, rows, cols, name, reps, ms):
    """{'erf_fwd_ms', 'erf_bwd_ms', 'tanh_fwd_ms', 'tanh_bwd_ms'} of PyTorch."""
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(rows, cols, generator=g).to(dt)
    dy = torch.randn(rows, cols, generator=g).to(dt)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    aten = torch.ops.aten

    def timed(call):
        return best_ms(call, reps, ms)

    out = {}
    for approx in ("none", "tanh"):
        key = "erf" if approx == "none" else "tanh"
        try:
            out[f"{key}_fwd_ms"] = min(
                timed(lambda: aten.gelu.out(x, approximate=approx, out=y)),
                timed(lambda: aten.gelu(x, approximate=approx)))
            out[f"{key}_bwd_ms"] = min(
                timed(lambda: aten.gelu_backward.grad_input(
                    dy, x, approximate=approx, grad_input=dx)),
                timed(lambda: aten.gelu_backward(dy, x, approximate=approx)))
        except RuntimeError:  # a dtype PyTorch's CPU kernels lack
            out[f"{key}_fwd_ms"] = out[f"{key}_bwd_ms"] = float("nan")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    timing_args(p)
    p.add_argument("--shape", default="1024x1536", help="RxC")
    p.add_argument("--compare", help="bin folder of another build, timed as 'before'")
    p.add_argument("--torch-json", action="store_true",
                   help="(internal) time PyTorch only, print its figures as JSON")
    a = p.parse_args()
    rows, cols = (int(v) for v in a.shape.split("x"))
    # PyTorch's figures come from the --torch-json process, which run() starts as
    # pytorch_blas() says.
    blas = "" if a.torch_json else pytorch_blas()

    import torch
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    if a.torch_json:
        print(json.dumps({name: torch_ms(torch, rows, cols, name, a.reps, a.ms)
                          for name in DTYPES}))
        return
    best = {}

    def keep(key, v):
        if v == v:  # NaN: PyTorch lacks the kernel
            best[key] = min(best.get(key, float("inf")), v)

    info = {}
    builds = [("dsrt", BIN)] + ([("before", a.compare)] if a.compare else [])
    for _ in range(a.rounds):
        for who, bin_dir in builds:
            lines = [json.loads(l) for l in run(
                [os.path.join(bin_dir, "dsrt_gelu_bench"), "--threads", str(a.threads), "--reps",
                 str(a.reps), "--ms", str(a.ms), "--shape", a.shape]).splitlines() if l.strip()]
            info = lines[0] if who == "dsrt" else info
            for r in lines[1:]:
                for k, v in r.items():
                    if k.endswith("_ms"):
                        keep((who, r["dtype"], k), v)
        figures = json.loads(run([PY, os.path.abspath(__file__), "--torch-json", "--threads",
                                  str(a.threads), "--reps", str(a.reps), "--ms", str(a.ms),
                                  "--shape", a.shape]))
        for name in DTYPES:
            for k, v in figures[name].items():
                keep(("torch", name, k), v)

    def ms(v):
        return "-" if v != v or v == float("inf") else f"{v:.2f}"

    def ratio(x, y):
        return "-" if y != y or y == float("inf") else f"{x / y:.2f}x"

    before = bool(a.compare)
    out = [f"[{rows} x {cols}], {a.threads} threads, N(0, 1) inputs; dsrt bf16 conversions: "
           f"{info.get('bf16_path')}; PyTorch {torch.__version__}. Milliseconds per call, best "
           f"of {a.rounds} rounds x {a.reps} repetitions.", "",
           "| dtype | GELU |" + (" before fwd |" if before else "") + " dsrt fwd | torch fwd |" +
           (" before bwd |" if before else "") + " dsrt bwd | torch bwd "
           "| dsrt / torch fwd | dsrt / torch bwd |",
           "|---|---|---|---|---|---|---|---|" + ("---|---|" if before else "")]
    for name in DTYPES:
        for key in ("erf", "tanh"):
            f, b = f"{key}_fwd_ms", f"{key}_bwd_ms"
            df, db = best[("dsrt", name, f)], best[("dsrt", name, b)]
            tf = best.get(("torch", name, f), float("nan"))
            tb = best.get(("torch", name, b), float("nan"))
            bf = f" {ms(best[('before', name, f)])} |" if before else ""
            bb = f" {ms(best[('before', name, b)])} |" if before else ""
            out.append(f"| {name} | {key} |{bf} {ms(df)} | {ms(tf)} |{bb} {ms(db)} | {ms(tb)} "
                       f"| {ratio(df, tf)} | {ratio(db, tb)} |")
    report(blas + "\n\n" + "\n".join(out) + "\n", a.markdown)


if __name__ == "__main__":
    main()
