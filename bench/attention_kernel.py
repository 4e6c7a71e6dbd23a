#!/usr/bin/python3
"""dsrt's fused attention kernel next to PyTorch's attention, and the GEMMs in it, in one run.

    /usr/bin/python3 bench/attention_kernel.py [--threads 2] [--rounds 3] [--markdown FILE]

For each [batch, seq, heads, head size] (the layout the exporters' GPT
writes, causal, scale 1/sqrt(E)): dsrt::cpu::attention and attentionGrad in
float32 and bf16 (build/bin/dsrt_attention_bench, test/runtime/kernels/
AttentionBench.cpp), and the same calls' GEMMs alone as batched matmuls (the
time left over is the row steps: max, exponentials, normalization, softmax
gradient); and PyTorch eager's attention as the model writes it (matmul,
scale, causal mask by masked_fill, softmax, matmul; forward, and forward +
backward through autograd) in float32 and under CPU bf16 autocast, with the
same threads and tcmalloc (bench/common.py). PyTorch 1.13 has no fused
scaled_dot_product_attention.

Times are ms per call, each the best of --reps repetitions (each about --ms
milliseconds of calls); dsrt and PyTorch alternate --rounds times and each
figure is its best round, so a busy spell favours neither.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, best_ms, pytorch_blas, report, run, timing_args  # noqa: E402

# name, batch, seq, heads, head size
SHAPES = [("6-layer d=384 GPT's", 8, 128, 6, 64), ("GPT-2 small at seq 1024", 1, 1024, 12, 64)]


def torch_ms(torch, b, t, h, e, bf16, reps, ms):
    """(forward, forward + backward) of the model's attention, in ms."""
    g = torch.Generator().manual_seed(1)
    q, k, v = [(torch.rand(b, t, h, e, generator=g) * 2 - 1).transpose(1, 2).requires_grad_()
               for _ in range(3)]
    mask = torch.ones(t, t, dtype=torch.bool).tril().logical_not()
    dout = torch.rand(b, h, t, e, generator=g)

    def fwd():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / e ** 0.5)
            p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
            return torch.matmul(p, v)

    def step():
        fwd().backward(dout)

    # The forward as training runs it: recording what backward needs.
    return best_ms(fwd, reps, ms), best_ms(step, reps, ms)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    timing_args(p)
    a = p.parse_args()
    blas = pytorch_blas(in_process=True)  # before torch loads

    import torch
    torch.set_num_threads(a.threads)
    best = {}

    def keep(key, v):
        best[key] = min(best.get(key, float("inf")), v)

    for _ in range(a.rounds):
        cmd = [os.path.join(BIN, "dsrt_attention_bench"), "--threads", str(a.threads), "--reps",
               str(a.reps), "--ms", str(a.ms)]
        for _, b, t, h, e in SHAPES:
            cmd += ["--shape", f"{b}x{t}x{h}x{e}"]
        lines = [json.loads(l) for l in run(cmd).splitlines() if l.strip()]
        info, rows = lines[0], lines[1:]
        for (name, b, t, h, e), r in zip(SHAPES, rows):
            for col, v in r.items():
                if col not in ("batch", "seq", "heads", "head_size"):
                    keep((name, col), v)
            for prec, bf16 in (("fp32", False), ("bf16", True)):
                f, fb = torch_ms(torch, b, t, h, e, bf16, a.reps, a.ms)
                keep((name, "torch_" + prec + "_fwd"), f)
                keep((name, "torch_" + prec + "_step"), fb)

    out = [f"{a.threads} threads; dsrt bf16 GEMM: {info['bf16_gemm']}, float GEMM: "
           f"{info['fp32_gemm']}; PyTorch {torch.__version__} (bf16: CPU autocast). ms per call, "
           f"best of {a.rounds} rounds x {a.reps} repetitions; causal; forward + backward is "
           "dsrt's two calls against PyTorch's forward and autograd backward.", "",
           "| shape [B, T, H, E] | precision | dsrt fwd | of which GEMMs | torch fwd | torch / dsrt "
           "| dsrt fwd+bwd | of which GEMMs | torch fwd+bwd | torch / dsrt |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, b, t, h, e in SHAPES:
        for prec in ("fp32", "bf16"):
            c = lambda col: best[(name, col)]  # noqa: E731
            fwd, step = c(prec + "_fwd"), c(prec + "_fwd") + c(prec + "_bwd")
            gf, gs = c(prec + "_gemm_fwd"), c(prec + "_gemm_fwd") + c(prec + "_gemm_bwd")
            tf, ts = c("torch_" + prec + "_fwd"), c("torch_" + prec + "_step")
            out.append(f"| {name} [{b}, {t}, {h}, {e}] | {prec} | {fwd:.3f} | {gf:.3f} "
                       f"({gf / fwd:.0%}) | {tf:.3f} | {tf / fwd:.2f}x | {step:.3f} | {gs:.3f} "
                       f"({gs / step:.0%}) | {ts:.3f} | {ts / step:.2f}x |")
    out += ["", "\"of which GEMMs\": the kernel's GEMMs timed alone as batched matmuls over the "
            "heads (the forward's two; the backward's five: the scores again, dV, dP, dQ, dK); "
            "a share over 100% means the fused kernel's per-head calls beat the batched ones."]
    report(blas + "\n\n" + "\n".join(out) + "\n", a.markdown)


if __name__ == "__main__":
    main()
