#!/usr/bin/python3
"""dsrt's float and bf16 GEMMs next to PyTorch's, and the machine's bf16 peak, in one run.

    /usr/bin/python3 bench/bf16_gemm.py [--threads 2] [--rounds 3] [--markdown FILE]

The shapes are the GEMMs of the issue-12 GPT (d 384, 6 heads, seq 128, batch 8
-> 1024 tokens, MLP 4d, vocab 4096): QKV [1024 x 384] x [384 x 1152], MLP up
[1024 x 384] x [384 x 1536], MLP down [1024 x 1536] x [1536 x 384], the head
[1024 x 384] x [384 x 4096], and attention's two batched GEMMs (48 heads x
[128 x 64] x [64 x 128] for the scores, [128 x 128] x [128 x 64] for the
values). With the same thread count: dsrt::cpu::matmul on float operands
(dnnl_sgemm), on bf16 operands with a float result and with a bf16 result
(oneDNN's matmul primitive, cached per shape), torch.matmul in float32 and in
bfloat16 (torch.set_num_threads); and dsrt's two backward GEMMs of each
linear layer (dx = dy W^T, dW += x^T dy into a float gradient). The peak is
the best bf16 GEMM (float or bf16 result) oneDNN reaches through dsrt on
square sizes 512, 1024, 1536, 2048 (up to --peak).

Every figure is the best of --reps timed repetitions (each about --ms
milliseconds of back-to-back calls): other processes on a shared machine
only ever make a repetition slower. dsrt and PyTorch alternate --rounds
times and each figure is its best round, so a busy spell favours neither.
build/bin/dsrt_gemm_bench (test/runtime/kernels/GemmBench.cpp) does the dsrt
half.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, best_ms, pytorch_blas, report, run, timing_args  # noqa: E402

# name, batch, M, K, N
SHAPES = [("QKV", 1, 1024, 384, 1152), ("MLP up", 1, 1024, 384, 1536),
          ("MLP down", 1, 1024, 1536, 384), ("head", 1, 1024, 384, 4096),
          ("attn scores", 48, 128, 64, 128), ("attn values", 48, 128, 128, 64)]


def label(b, m, k, n):
    return f"{b} x {m} x {k} x {n}" if b > 1 else f"{m} x {k} x {n}"


def torch_gflops(torch, b, m, k, n, dtype, reps, ms):
    g = torch.Generator().manual_seed(1)
    lead = (b,) if b > 1 else ()
    x = (torch.rand(*lead, m, k, generator=g) * 2 - 1).to(dtype)
    w = (torch.rand(*lead, k, n, generator=g) * 2 - 1).to(dtype)
    out = torch.empty(*lead, m, n, dtype=dtype)
    ms_per_call = best_ms(lambda: torch.matmul(x, w, out=out), reps, ms)
    return 2.0 * b * m * k * n / ms_per_call / 1e6


def dsrt_round(a):
    """One run of dsrt_gemm_bench: {(b, m, k, n): figures}, {size: peak}, info."""
    cmd = [os.path.join(BIN, "dsrt_gemm_bench"), "--threads", str(a.threads), "--reps",
           str(a.reps), "--ms", str(a.ms), "--peak", str(a.peak)]
    for _, b, m, k, n in SHAPES:
        cmd += ["--shape", f"{b}x{m}x{k}x{n}"]
    lines = [json.loads(l) for l in run(cmd).splitlines() if l.strip()]
    return ({(r["batch"], r["m"], r["k"], r["n"]): r for r in lines if "m" in r},
            {r["square"]: max(r["bf16_out_fp32"], r["bf16"]) for r in lines if "square" in r},
            lines[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    timing_args(p)
    p.add_argument("--peak", type=int, default=2048, help="largest square size of the peak search")
    a = p.parse_args()
    blas = pytorch_blas(in_process=True)  # before torch loads

    import torch
    torch.set_num_threads(a.threads)
    best, squares = {}, {}

    def keep(table, key, v):
        table[key] = max(table.get(key, 0.0), v)

    for _ in range(a.rounds):
        dsrt, sq, info = dsrt_round(a)
        for s, v in sq.items():
            keep(squares, s, v)
        for name, b, m, k, n in SHAPES:
            for col, v in dsrt[(b, m, k, n)].items():
                if col not in ("batch", "m", "k", "n"):
                    keep(best, (name, col), v)
            keep(best, (name, "torch_fp32"),
                 torch_gflops(torch, b, m, k, n, torch.float32, a.reps, a.ms))
            keep(best, (name, "torch_bf16"),
                 torch_gflops(torch, b, m, k, n, torch.bfloat16, a.reps, a.ms))
    pk_size = max(squares, key=squares.get)
    pk = squares[pk_size]

    def flops(b, m, k, n):
        return 2.0 * b * m * k * n

    def overall(col, names):
        """GFLOP/s of the named GEMMs run once each."""
        shapes = [s for s in SHAPES if s[0] in names]
        return (sum(flops(*s[1:]) for s in shapes) /
                sum(flops(*s[1:]) / (best[(s[0], col)] * 1e9) for s in shapes) / 1e9)

    out = [f"{a.threads} threads; dsrt bf16 conversions: {info['bf16_path']}, bf16 GEMM: "
           f"{info['bf16_gemm']}, float GEMM: {info['fp32_gemm']}; PyTorch {torch.__version__}. "
           f"GFLOP/s, best of {a.rounds} rounds x {a.reps} repetitions.", "",
           "| GEMM ([B x] M x K x N) | dsrt fp32 | dsrt bf16 (fp32 out) | dsrt bf16 | torch fp32 "
           "| torch bf16 | dsrt bf16 / dsrt fp32 | dsrt bf16 / torch bf16 | dsrt bf16 / peak |",
           "|---|---|---|---|---|---|---|---|---|"]

    def row(name, f32, b32, b16, t32, t16):
        return (f"| {name} | {f32:.0f} | {b32:.0f} | {b16:.0f} | {t32:.0f} | {t16:.0f} "
                f"| {b16 / f32:.2f}x | {b16 / t16:.2f}x | {b16 / pk:.0%} |")

    cols = ["fp32", "bf16_out_fp32", "bf16", "torch_fp32", "torch_bf16"]
    for name, b, m, k, n in SHAPES:
        out.append(row(f"{name} {label(b, m, k, n)}", *[best[(name, c)] for c in cols]))
    names = [s[0] for s in SHAPES]
    out.append(row("all, once each", *[overall(c, names) for c in cols]))

    linear = [s for s in SHAPES if s[1] == 1]
    out += ["", "Backward GEMMs of the linear layers (dsrt; dx = dy W^T in the operands' type, "
            "dW += x^T dy into a float gradient):", "",
            "| layer | dx fp32 | dx bf16 | ratio | dW fp32 | dW bf16 | ratio | dW bf16 / peak |",
            "|---|---|---|---|---|---|---|---|"]
    for name, b, m, k, n in linear:
        dx32, dx16 = best[(name, "fp32_dx")], best[(name, "bf16_dx")]
        dw32, dw16 = best[(name, "fp32_dw")], best[(name, "bf16_dw")]
        out.append(f"| {name} | {dx32:.0f} | {dx16:.0f} | {dx16 / dx32:.2f}x | {dw32:.0f} "
                   f"| {dw16:.0f} | {dw16 / dw32:.2f}x | {dw16 / pk:.0%} |")
    out += ["", "The bias gradient behind a GELU's (dsrt bf16; dx = (dy W^T) * gelu'(h) and the "
            "column sums of dx, summed after the GEMM by reduce or by the GEMM as it stores dx; "
            "GFLOP/s of the GEMM alone):", "",
            "| layer | sum after | summing in the GEMM | ratio |", "|---|---|---|---|"]
    for name, b, m, k, n in linear:
        after, summing = best[(name, "bf16_dx_sum_after")], best[(name, "bf16_dx_summing")]
        out.append(f"| {name} | {after:.0f} | {summing:.0f} | {summing / after:.2f}x |")
    out += ["", "bf16 GEMM peak (square, bf16 operands, the better of float and bf16 results, "
            "through dsrt / oneDNN): " +
            ", ".join(f"{s}^3 {v:.0f}" for s, v in sorted(squares.items())) +
            f" GFLOP/s; peak {pk:.0f} GFLOP/s at {pk_size}^3."]
    report(blas + "\n\n" + "\n".join(out) + "\n", a.markdown)


if __name__ == "__main__":
    main()
