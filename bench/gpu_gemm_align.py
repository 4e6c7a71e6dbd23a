#!/usr/bin/env python3
"""bf16 GEMMs of GPT-2's vocabulary head on one NVIDIA GPU, with and without
16-byte-aligned rows: what cuBLAS gives when a row of the logits is 50257
bf16 elements (100514 bytes, not a multiple of 16), when the rows are
padded to 50264 elements (the same product, dsrt's padded copy), and when
the vocabulary itself is 50304 (nanoGPT's padding), for the forward GEMM
and its two gradients. Runs on the GPU machine (PyTorch with CUDA):

    python3 bench/gpu_gemm_align.py [--tokens 8192] [--d 768] [--vocab 50257]

Prints one row per GEMM and layout: milliseconds (median of 10 after 3
warm-up calls) and TFLOP/s.
"""
import argparse
import time


def timed(torch, fn, reps=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    a = p.parse_args()
    import torch
    dev, bf = "cuda", torch.bfloat16
    M, K = a.tokens, a.d
    print(f"{torch.cuda.get_device_name()}, bf16, tokens {M}, d {K}")
    print(f"| GEMM | vocabulary rows | ms | TFLOP/s |\n| --- | --- | --- | --- |")

    def layouts(V):
        pad = (V + 7) // 8 * 8
        h = torch.randn(M, K, device=dev, dtype=bf)
        # A [V, K] weight; logits [M, V] with rows of V (contiguous) or of
        # `pad` (a view of padded storage: the same sizes, aligned rows).
        w = torch.randn(V, K, device=dev, dtype=bf)
        g = torch.randn(M, V, device=dev, dtype=bf)
        gp = torch.randn(M, pad, device=dev, dtype=bf)[:, :V]
        # The forward into padded rows: the product with `pad` weight rows
        # (the padded copy's extra columns, a 1e-4 share of the flops).
        wp = torch.randn(pad, K, device=dev, dtype=bf)
        return h, w, g, gp, wp

    for V, label in ((a.vocab, "contiguous"), (a.vocab, "padded rows"),
                     ((a.vocab + 63) // 64 * 64, "vocabulary padded to 64")):
        h, w, g, gp, wp = layouts(V)
        padded = label == "padded rows"
        gg = gp if padded else g
        ww = wp if padded else w
        flops = 2 * M * K * V
        rows = f"{V} ({label})"
        for name, fn in (("logits = h w^T", lambda: torch.mm(h, ww.t())),
                         ("dh = dlogits w", lambda: torch.mm(gg, w)),
                         ("dw = dlogits^T h", lambda: torch.mm(gg.t(), h))):
            t = timed(torch, fn)
            print(f"| {name} | {rows} | {t * 1e3:.3f} | {flops / t / 1e12:.1f} |")


if __name__ == "__main__":
    main()
