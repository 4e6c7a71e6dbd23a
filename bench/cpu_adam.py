#!/usr/bin/env python3
"""dsrt's CPU Adam(W) step against torch.optim (1.13) and the memory
bandwidth, in one run (issue 24, item 4: the kernel of the offloaded step).

For each parameter count: dsrt's cpu::adam (AdamW, fp32 p, g, m, v, all
threads; build/bin/dsrt_adam_bench), torch.optim.Adam and AdamW with
foreach off and on (the same threads), and the bound of a step that reads
p, g, m, v and writes p, m, v once (the same loop without the math,
measured in the same run), with a threaded memcpy for reference.

    /usr/bin/python3 bench/cpu_adam.py [--sizes 10e6 50e6 200e6] [--bin build/bin]

Prints a Markdown table of parameters per second and the ratios.

Then a model's whole clipped step (issue 47, item 3): the 76 parameter
tensors of the issue-12 GPT (6 layers, d 384, vocab 4096, seq 128; 12.3M
parameters), gradients clipped to a global norm below theirs, AdamW: dsrt
unfused (per tensor the clip's scale, then per tensor cpu::adam: what a
--fuse attention,epilogues plan runs) and fused (one cpu::fusedAdam
applying the clip's factor as it reads: --fuse all), against
torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW with foreach off and
on, the same threads. And the same step with DeepSpeed's LAMB (per tensor
trust ratios): dsrt unfused (per tensor the clip's scale, cpu::lambStats
and cpu::lamb) and fused (one cpu::fusedLambStats, one cpu::fusedLamb),
against the clip and LAMB written in eager PyTorch tensor ops (PyTorch has
no LAMB, and DeepSpeed's FusedLamb is CUDA-only), the way a user would.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import plain_env, pytorch_blas  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_rate(torch, cls, n, foreach, reps=5):
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    opt = cls([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=foreach)
    ts = []
    for _ in range(reps + 2):
        t0 = time.perf_counter()
        opt.step()
        ts.append(time.perf_counter() - t0)
    ts = sorted(ts[2:])
    del opt, p
    return n / ts[len(ts) // 2]


# The issue-12 GPT's parameter tensors, in its order.
def gpt_tensors(layers=6, d=384, vocab=4096, seq=128):
    sizes = [vocab * d, seq * d]
    for _ in range(layers):
        sizes += [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    return sizes + [d, d]


def torch_clipped_rate(torch, sizes, foreach, reps=5):
    ps = [torch.nn.Parameter(torch.full((n,), 0.5)) for n in sizes]
    for p in ps:
        p.grad = torch.full_like(p, 0.01)
    opt = torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            foreach=foreach)
    ts = []
    for _ in range(reps + 2):
        t0 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(ps, 1e-3)
        opt.step()
        ts.append(time.perf_counter() - t0)
        for p in ps:
            p.grad.fill_(0.01)
    ts = sorted(ts[2:])
    return sum(sizes) / ts[len(ts) // 2]


def torch_clipped_lamb_rate(torch, sizes, reps=5):
    """The clip and DeepSpeed's LAMB (FusedLamb's formula) in eager tensor ops."""
    ps = [torch.full((n,), 0.5) for n in sizes]
    gs = [torch.full_like(p, 0.01) for p in ps]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    b1, b2, eps, wd, lr = 0.9, 0.999, 1e-6, 0.01, 1e-3
    ts = []
    for step in range(1, reps + 3):
        t0 = time.perf_counter()
        with torch.no_grad():
            torch.nn.utils.clip_grad_norm_([_as_param(torch, p, g) for p, g in zip(ps, gs)], 1e-3)
            size = lr * (1 - b2 ** step) ** 0.5 / (1 - b1 ** step)
            for p, g, m, v in zip(ps, gs, ms, vs):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                u = m / (v.sqrt() + eps) + wd * p
                w_norm, u_norm = p.norm(), u.norm()
                ratio = (w_norm / u_norm).clamp(0.01, 10.0) if w_norm > 0 and u_norm > 0 else 1.0
                p.add_(u * ratio, alpha=-size)
        ts.append(time.perf_counter() - t0)
        for g in gs:
            g.fill_(0.01)
    ts = sorted(ts[2:])
    return sum(sizes) / ts[len(ts) // 2]


_params = {}


def _as_param(torch, p, g):
    """p as a Parameter whose .grad is g (clip_grad_norm_ reads .grad), made once."""
    key = id(p)
    if key not in _params:
        q = torch.nn.Parameter(p, requires_grad=True)
        q.grad = g
        _params[key] = q
    return _params[key]


def clipped_rates(a, env, sizes, grads, flags):
    """dsrt_adam_bench --tensors: {clipped_unfused, clipped_fused: params/s}."""
    out = subprocess.run([os.path.join(a.bin, "dsrt_adam_bench"), "--reps", "9", "--tensors",
                          ",".join(map(str, sizes))] + flags +
                         (["--bf16"] if grads == "bf16" else []),
                         check=True, capture_output=True, text=True, env=env).stdout
    return {line.split()[0]: float(line.split()[3]) for line in out.splitlines()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[10e6, 50e6, 200e6])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    blas = pytorch_blas(in_process=True)  # before torch loads
    sizes = [int(s) for s in a.sizes]
    env = dict(plain_env(), OMP_NUM_THREADS=str(a.threads))
    out = subprocess.run([os.path.join(a.bin, "dsrt_adam_bench")] + [str(n) for n in sizes],
                         check=True, capture_output=True, text=True, env=env).stdout
    dsrt, stream, copy = {}, {}, None
    for line in out.splitlines():
        f = line.split()
        if f[0] == "adam":
            dsrt[int(f[1])] = float(f[2])
        elif f[0] == "stream":
            stream[int(f[1])] = float(f[2])
        elif f[0] == "copy":
            copy = float(f[1])
    import torch
    torch.set_num_threads(a.threads)
    print(blas)
    print(f"{a.threads} threads; threaded memcpy {copy / 1e9:.1f} GB/s (read + write); "
          f"Adam moves 28 bytes per parameter (reads 16, writes 12)")
    print()
    print("| parameters | dsrt (params/s) | torch Adam | torch Adam foreach | torch AdamW | "
          "torch AdamW foreach | dsrt / best torch | stream bound (params/s) | dsrt / bound |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        t = [torch_rate(torch, torch.optim.Adam, n, False),
             torch_rate(torch, torch.optim.Adam, n, True),
             torch_rate(torch, torch.optim.AdamW, n, False),
             torch_rate(torch, torch.optim.AdamW, n, True)]
        print(f"| {n / 1e6:.0f}M | {dsrt[n]:.3e} | " + " | ".join(f"{x:.3e}" for x in t) +
              f" | {dsrt[n] / max(t):.1f}x | {stream[n]:.3e} | {100 * dsrt[n] / stream[n]:.0f}% |")

    sizes = gpt_tensors()
    rate = {grads: clipped_rates(a, env, sizes, grads, []) for grads in ("fp32", "bf16")}
    t = [torch_clipped_rate(torch, sizes, False), torch_clipped_rate(torch, sizes, True)]
    print()
    print(f"The issue-12 GPT's clipped AdamW step: {len(sizes)} tensors, "
          f"{sum(sizes) / 1e6:.1f}M parameters, params/s (bf16: the gradients of a mixed "
          f"precision step; dsrt unfused casts them to fp32 first, fused reads them narrow; "
          f"torch's are fp32)")
    print()
    print("| gradients | dsrt unfused | dsrt fused | torch clip + AdamW | "
          "torch clip + AdamW foreach | fused / unfused | fused / best torch |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for grads in ("fp32", "bf16"):
        r = rate[grads]
        print(f"| {grads} | {r['clipped_unfused']:.3e} | {r['clipped_fused']:.3e} | "
              f"{t[0]:.3e} | {t[1]:.3e} | {r['clipped_fused'] / r['clipped_unfused']:.2f}x | "
              f"{r['clipped_fused'] / max(t):.1f}x |")

    lamb = {grads: clipped_rates(a, env, sizes, grads, ["--lamb"]) for grads in ("fp32", "bf16")}
    t = torch_clipped_lamb_rate(torch, sizes)
    print()
    print(f"The same step with DeepSpeed's LAMB: params/s (torch: the clip and LAMB in eager "
          f"tensor ops, fp32 gradients)")
    print()
    print("| gradients | dsrt unfused | dsrt fused | torch clip + LAMB (eager) | "
          "fused / unfused | fused / torch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for grads in ("fp32", "bf16"):
        r = lamb[grads]
        print(f"| {grads} | {r['clipped_unfused']:.3e} | {r['clipped_fused']:.3e} | {t:.3e} | "
              f"{r['clipped_fused'] / r['clipped_unfused']:.2f}x | "
              f"{r['clipped_fused'] / t:.1f}x |")


if __name__ == "__main__":
    main()
