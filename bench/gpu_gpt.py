#!/usr/bin/env python3
"""GPT-2 small (124M) training steps on one NVIDIA GPU: dsrt --device cuda
against PyTorch eager and torch.compile, in one run, on the same model,
weights, data and batch (AdamW, clipping 1.0, no dropout), in fp32 or bf16
(--precision bf16 with a plan compiled --precision bf16; PyTorch runs its
forward under torch.autocast(bfloat16) over fp32 parameters).

Runs on the GPU machine (scripts/gpu/check.sh calls it), where PyTorch
with CUDA is installed; the plan comes from scripts/gpu/bundle.sh, without
its weights (500 MB do not travel): this script builds models/gpt.py's GPT
with PyTorch's seeded initialisation, writes its state as the plan's
weights.safetensors (the names and shapes in weights.json) and updates
plan.sha256, so that dsrt and PyTorch start from the same weights.

    python3 bench/gpu_gpt.py --plan .gpu/gpt2 --dsrt .gpu/bin/dsrt --out OUT

Reports, for each of dsrt, eager and compile: tokens/s (mean over the
timed steps after --warmup), the ratio to torch.compile, MFU against the
GPU's measured GEMM peak in the run's precision (an 8192^3 torch.mm,
fp32 without TF32, or bf16) with the
flops of PaLM's formula (6 N + 12 L T d per token), peak device memory
(PyTorch: max_memory_allocated; dsrt: the largest nvidia-smi reading of
its process, against its planned arena) and the losses of the first steps,
which must agree (same weights, same data).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "models"))
sys.path.insert(0, os.path.join(REPO, "bench"))
from common import sha256  # noqa: E402  (the standard library only)

MODEL = dict(layers=12, d_model=768, heads=12, vocab=50257, seq=1024, batch=8,
             attn="manual", gelu="erf", tied=True, key_padding_mask=False,
             pos="learned", dropout=0.0, seed=0)


def build(torch):
    import gpt
    a = argparse.Namespace(**MODEL)
    torch.manual_seed(0)
    return gpt.build_model(a)


def write_weights(torch, model, plan):
    from safetensors.torch import save_file
    want = json.load(open(os.path.join(plan, "weights.json")))
    sd = model.state_dict()
    tensors = {}
    for name, meta in want.items():
        if name not in sd or list(sd[name].shape) != meta["shape"] or meta["dtype"] != "F32":
            sys.exit(f"gpu_gpt: the plan's weight {name} {meta} is not the model's")
        tensors[name] = sd[name].detach().float().contiguous().clone()
    path = os.path.join(plan, "weights.safetensors")
    save_file(tensors, path)
    lines = [l for l in open(os.path.join(plan, "plan.sha256")).read().splitlines()
             if not l.endswith("weights.safetensors")]
    lines.append(f"{sha256(path)}  weights.safetensors")
    open(os.path.join(plan, "plan.sha256"), "w").write("\n".join(lines) + "\n")


def token_file(path, n, vocab, seed=1):
    import numpy as np
    rng = np.random.default_rng(seed)
    rng.integers(0, vocab, size=n, dtype=np.int64).astype("<u2").tofile(path)
    return np.fromfile(path, dtype="<u2").astype("int64")


def batches(tok, torch, steps):
    """dsrt's order (bench/train_pytorch.py): row r starts at (r mod R) * T."""
    import numpy as np
    B, T = MODEL["batch"], MODEL["seq"]
    R = (len(tok) - 1) // T
    out = []
    for s in range(steps):
        rows = [(s * B + b) % R for b in range(B)]
        x = torch.from_numpy(np.stack([tok[r * T:r * T + T] for r in rows]))
        y = torch.from_numpy(np.stack([tok[r * T + 1:r * T + T + 1] for r in rows]))
        out.append((x.cuda(), y.cuda()))
    return out


def train_torch(torch, model, data, warmup, compiled, bf16, profile_steps=0):
    """Trains on `data`, timing each step; then, with profile_steps, runs that
    many more steps under torch.profiler and prints where the GPU's time
    went (after the figures are taken: it changes none of them)."""
    model = model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    fwd = torch.compile(model) if compiled else model
    torch.cuda.reset_peak_memory_stats()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    losses, times = [], []
    for x, y in data:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step(x, y)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    peak = torch.cuda.max_memory_allocated()
    if profile_steps:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for x, y in data[:profile_steps]:
                step(x, y)
            torch.cuda.synchronize()
        print(f"torch.profiler, {'torch.compile' if compiled else 'eager'}, "
              f"{profile_steps} steps: the GPU kernels by total time")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30,
                                        max_name_column_width=90))
    return losses, times[warmup:], peak


def gpu_memory_sampler(pid_holder, peak):
    while pid_holder.get("running"):
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0] == str(pid_holder.get("pid")):
                peak[0] = max(peak[0], int(parts[1]) * 2**20)
        time.sleep(0.2)


def run_dsrt(dsrt, plan, tokens, steps, out, env=None):
    cmd = [dsrt, plan, "--device", "cuda", "--data", tokens, "--steps", str(steps),
           "--out", out]
    holder, peak = {"running": True}, [0]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **(env or {})))
    holder["pid"] = p.pid
    t = threading.Thread(target=gpu_memory_sampler, args=(holder, peak))
    t.start()
    text = p.communicate()[0]
    holder["running"] = False
    t.join()
    print(text[-3000:])
    if p.returncode:
        sys.exit(f"gpu_gpt: dsrt failed ({p.returncode})")
    rows = list(__import__("csv").DictReader(open(os.path.join(out, "metrics.csv"))))
    return [float(r["loss"]) for r in rows], [float(r["step_time_s"]) for r in rows], peak[0]


def gemm_peak(torch, bf16):
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = torch.bfloat16 if bf16 else torch.float32
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", required=True)
    p.add_argument("--dsrt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="the plan's precision (dsc --precision); PyTorch matches it")
    p.add_argument("--torch-profile", type=int, default=0, metavar="STEPS",
                   help="after the timed runs, profile this many steps of torch.compile "
                        "with torch.profiler and print its kernels by time")
    p.add_argument("--dsrt-variant", action="append", default=[], metavar="VAR=VALUE",
                   help="also run dsrt with this environment setting (repeatable; one row "
                        "each), e.g. DSRT_CUDA_GEMM_PAD=0 to measure what a feature buys")
    args = p.parse_args()
    for v in args.dsrt_variant:
        if "=" not in v:
            p.error(f"--dsrt-variant {v!r}: expected VAR=VALUE")
    bf16 = args.precision == "bf16"
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 throughout, as dsrt's cuBLAS math
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    model = build(torch)
    n_params = sum(p.numel() for p in model.parameters())
    write_weights(torch, model, args.plan)
    B, T = MODEL["batch"], MODEL["seq"]
    tokens = os.path.join(args.out, "tokens.bin")
    tok = token_file(tokens, (args.steps * B + 1) * T + 1, MODEL["vocab"])
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}

    results = {}
    d_losses, d_times, d_peak = run_dsrt(args.dsrt, args.plan, tokens, args.steps,
                                         os.path.join(args.out, "dsrt-run"))
    arena = None
    for line in open(os.path.join(args.plan, "manifest.txt")):
        m = re.search(r"arena[^0-9]*([0-9.]+)\s*(MiB|GiB|bytes)", line)
        if m and arena is None:
            arena = line.strip()
    results["dsrt"] = dict(losses=d_losses, times=d_times[args.warmup:], peak=d_peak)
    for k, v in enumerate(args.dsrt_variant):
        var, value = v.split("=", 1)
        losses, times, peak = run_dsrt(args.dsrt, args.plan, tokens, args.steps,
                                       os.path.join(args.out, f"dsrt-variant-{k}"),
                                       {var: value})
        results[f"dsrt {v}"] = dict(losses=losses, times=times[args.warmup:], peak=peak)
    data = batches(tok, torch, args.steps)
    for name, compiled in (("eager", False), ("compile", True)):
        model.load_state_dict(init)
        losses, times, peak = train_torch(torch, model, data, args.warmup, compiled, bf16,
                                          args.torch_profile if compiled else 0)
        results[name] = dict(losses=losses, times=times, peak=peak)
    peak_flops = gemm_peak(torch, bf16)
    L, d = MODEL["layers"], MODEL["d_model"]
    flops_per_token = 6 * n_params + 12 * L * T * d
    what = ("bf16 (dsrt: bf16 compute over fp32 master weights; PyTorch: autocast)" if bf16
            else "fp32 (no TF32)")
    lines = [f"GPT-2 small ({n_params / 1e6:.1f}M params), batch {B} x {T}, {what}, "
             f"AdamW, {args.steps} steps ({args.warmup} warm-up), "
             f"{torch.cuda.get_device_name()}",
             f"measured {args.precision} GEMM peak: {peak_flops / 1e12:.1f} TFLOP/s", "",
             f"| run | tokens/s | vs torch.compile | MFU ({args.precision} peak) | "
             "peak device memory | loss step 1 | loss step 3 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    tps = {k: B * T * len(v["times"]) / sum(v["times"]) for k, v in results.items()}
    for k in ["dsrt"] + [f"dsrt {v}" for v in args.dsrt_variant] + ["eager", "compile"]:
        v = results[k]
        lines.append(f"| {k} | {tps[k]:.0f} | {tps[k] / tps['compile']:.2f}x | "
                     f"{100 * tps[k] * flops_per_token / peak_flops:.1f}% | "
                     f"{v['peak'] / 2**30:.2f} GiB | {v['losses'][0]:.6f} | "
                     f"{v['losses'][2]:.6f} |")
    lines += ["", f"dsrt's plan: {arena}"]
    gap = max(abs(a - b) / abs(b) for a, b in
              zip(results["dsrt"]["losses"][:5], results["eager"]["losses"][:5]))
    lines.append(f"largest relative loss difference dsrt vs eager over the first 5 steps: "
                 f"{gap:.2e}")
    # The gap between PyTorch's own two runs, for scale (bf16 rounds).
    own = max(abs(a - b) / abs(b) for a, b in
              zip(results["compile"]["losses"][:5], results["eager"]["losses"][:5]))
    lines.append(f"the same between torch.compile and eager: {own:.2e}")
    for v in args.dsrt_variant:
        other = results[f"dsrt {v}"]["losses"]
        diff = max(abs(a - b) / abs(b) for a, b in zip(other, results["dsrt"]["losses"]))
        lines.append(f"dsrt with {v} against dsrt, all {len(other)} steps: largest relative "
                     f"loss difference {diff:.2e}")
    text = "\n".join(lines)
    print(text)
    open(os.path.join(args.out, "gpu_gpt.md"), "w").write(text + "\n")
    json.dump(dict(results=results, tokens_per_s=tps, peak_flops=peak_flops,
                   params=n_params), open(os.path.join(args.out, "gpu_gpt.json"), "w"))


if __name__ == "__main__":
    main()
