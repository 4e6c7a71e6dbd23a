#!/usr/bin/python3
"""bf16 mixed-precision training: dsc + dsrt against PyTorch's bf16 autocast, in one run.

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/train_bf16.py [--threads 2] \\
        [--steps 20] [--warmup 3] [--rounds 3] [--markdown FILE]

The model of issue 12: models/gpt.py with --layers 6 --d-model 384 --heads 6
--seq 128 --batch 8 --vocab 4096 --dropout 0 (tied head, erf GELU), AdamW
(lr 3e-4, no weight decay, no clipping), the project's own text as byte
tokens (ids < 256 < vocab), --threads kernel threads. Seven runs on the same
model and data:

* dsc bf16: `dsc model.onnx --config CFG --precision bf16 -o plan`, then dsrt
  (fp32 master weights, gradients and Adam states; bf16 compute), with
  dsc's default fusion (`--fuse all`: attention, the GEMM epilogues and
  the fused optimizer step), with all but the optimizer's
  (`--fuse attention,epilogues`), and unfused (`--fuse none`);
* PyTorch bf16 autocast: bench/train_pytorch.py's loop with forward and loss
  inside `torch.autocast("cpu", dtype=torch.bfloat16)`, backward and AdamW
  outside, fp32 parameters (what users write);
* dsc fp32 (fused and unfused) and PyTorch fp32.

Both PyTorch runs use torch.set_flush_denormal(True), as dsrt always does
(bench/train_gpt.py's fair baseline), and tcmalloc, as PyTorch's CPU users
run it (bench/common.py's pytorch_malloc: on glibc's malloc its step took
up to twice as long here). Each run trains --warmup untimed then
--steps timed steps in its own process; its speed is the median timed step.
The runs alternate --rounds times and each keeps its best round, so a
busy spell on a shared machine favours none of them; the min, median and
max of each run's median steps over the rounds are shown too (issue 47's
steady step).

Model FLOPs per token (PaLM's formula, as bench/ has no other): 6 N + 12 L d T,
N = the weights of the matmuls (12 L d^2 in the blocks + d V for the head,
no biases, no embeddings lookups), L layers, width d, sequence T; the check
against `dsc --explain`'s count of nn.matmul FLOPs is printed. MFU = model
FLOP/s / the machine's bf16 GEMM peak, measured in the same run as
bench/bf16_gemm.py does (build/bin/dsrt_gemm_bench --peak: square bf16 GEMMs
512..2048 through dsrt's oneDNN path, best). Peak RSS is ru_maxrss of each
process (os.wait4); dsrt's own report and the planned arena are shown too.
Finally `dsrt PLAN --profile` on the fused and unfused bf16 plans says
where their time goes, op by op. The CPU's model and flags head the
report: the figures hold for that CPU only.

Every timed command must run while holding /tmp/dsc-build.lock (run the
whole script under flock, as above): builds in build/ would disturb it.
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, REPO, plain_env, pytorch_blas, report, token_file, torch_env  # noqa: E402

LAYERS, D, HEADS, SEQ, BATCH, VOCAB = 6, 384, 6, 128, 8, 4096
MODEL_FLAGS = ["--layers", str(LAYERS), "--d-model", str(D), "--heads", str(HEADS),
               "--seq", str(SEQ), "--batch", str(BATCH), "--vocab", str(VOCAB),
               "--dropout", "0"]
LR = 3e-4


def run_measured(cmd):
    """(stdout, peak RSS MiB of the process from wait4); exits when it fails."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=torch_env() if cmd[0] == PY else plain_env())
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{out}\n{err}")
    return out, ru.ru_maxrss / 1024.0


def run(cmd):
    return run_measured(cmd)[0]


def flops_per_token():
    """6 N_matmul + 12 L d T (forward + backward, attention's two batched GEMMs)."""
    n_matmul = 12 * LAYERS * D * D + D * VOCAB
    return 6 * n_matmul + 12 * LAYERS * D * SEQ, n_matmul


def gemm_peak(threads, reps, ms, peak):
    """{size: GFLOP/s} of square bf16 GEMMs (bench/bf16_gemm.py's peak) and its build info."""
    out = run([os.path.join(BIN, "dsrt_gemm_bench"), "--threads", str(threads), "--reps",
               str(reps), "--ms", str(ms), "--peak", str(peak)])
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    return ({r["square"]: max(r["bf16_out_fp32"], r["bf16"]) for r in lines if "square" in r},
            lines[0])


def dsc_run(plan, a, work, tag):
    d = os.path.join(work, "runs", tag)
    out, rss = run_measured([os.path.join(BIN, "dsrt"), plan, "--data", a.data, "--steps",
                             str(a.warmup + a.steps), "--threads", str(a.threads),
                             "--out", d])
    own = re.search(r"peak RSS (\d+) MiB.*planned arena ([\d.]+) MiB", out)
    with open(os.path.join(d, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["step_time_s"]) for r in rows[a.warmup:]]
    return {"step_s": statistics.median(times), "rss": rss, "own_rss": int(own.group(1)),
            "arena": float(own.group(2)), "loss_last": float(rows[-1]["loss"])}


def torch_run(a, autocast):
    cmd = [PY, os.path.abspath(__file__), "--torch-worker"] + (["--autocast"] if autocast else [])
    cmd += ["--", "--data", a.data, "--threads", str(a.threads), "--steps", str(a.steps),
            "--warmup-steps", str(a.warmup), "--lr", str(LR), "--flush-denormal"] + MODEL_FLAGS
    out, rss = run_measured(cmd)
    r = json.loads(out.strip().splitlines()[-1])
    return {"step_s": r["step_time_median_s"], "rss": rss, "own_rss": r["peak_rss_mib"],
            "arena": None, "loss_last": r["loss_last"], "params": r["params"]}


def torch_worker(argv, autocast):
    """bench/train_pytorch.py's loop as it is; with --autocast the model's
    forward (which returns the loss) runs under CPU bf16 autocast."""
    import torch
    import train_pytorch  # puts models/ on sys.path
    import gpt
    if autocast:
        build = gpt.build_model

        class Autocast(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, *args):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return self.m(*args)

        gpt.build_model = lambda margs: Autocast(build(margs))
    return train_pytorch.main(argv)


def profile(plan, a, work, tag):
    """dsrt --profile's rows: [(op, calls, seconds, share)]."""
    out = run([os.path.join(BIN, "dsrt"), plan, "--data", a.data, "--steps",
               str(a.profile_steps), "--threads", str(a.threads), "--profile", "--out",
               os.path.join(work, "runs", "profile-" + tag)])
    body = out[out.index("\nop ") + 1:].splitlines()[1:]
    rows = []
    for line in body:
        m = re.match(r"(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%", line)
        if m:
            rows.append((m.group(1), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    return rows


def cpu_text():
    """lscpu's model name and the flags that decide the kernels."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown (no lscpu)"
    info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = [f for f in info.get("Flags", "").split()
             if f.startswith(("avx", "amx", "fma", "f16c"))]
    return f"{info.get('Model name', '?').strip()}, {os.cpu_count()} CPUs, " + " ".join(flags)


def profile_table(title, prof, a):
    """Markdown lines: where a plan's time goes, op by op."""
    total = sum(r[2] for r in prof)
    lines = [
        f"Where {title}'s time goes (`dsrt PLAN --steps {a.profile_steps} --profile`, all "
        f"steps; {total:.2f} s in ops = {total / a.profile_steps * 1e3:.0f} ms per step):",
        "",
        "| op | calls | seconds | share | ms per step |",
        "|---|---|---|---|---|"]
    for op, calls, sec, share in prof[:a.top]:
        lines.append(f"| {op} | {calls} | {sec:.3f} | {share:.1f}% | "
                     f"{sec / a.profile_steps * 1e3:.1f} |")
    rest_share = sum(r[3] for r in prof[a.top:])
    lines.append(f"| {len(prof) - a.top} others | | {total - sum(r[2] for r in prof[:a.top]):.3f}"
                 f" | {rest_share:.1f}% | |")
    return lines + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--rounds", type=int, default=3,
                    help="the four runs alternate this many times; each keeps its best")
    ap.add_argument("--profile-steps", type=int, default=10)
    ap.add_argument("--top", type=int, default=8, help="profile rows shown")
    ap.add_argument("--peak", type=int, default=2048, help="largest square GEMM of the peak")
    ap.add_argument("--reps", type=int, default=7, help="GEMM peak: repetitions per size")
    ap.add_argument("--ms", type=float, default=200, help="GEMM peak: ms per repetition")
    ap.add_argument("--data", help="uint16 token file (default: the repo's text as bytes)")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--autocast", action="store_true", help=argparse.SUPPRESS)
    a, rest = ap.parse_known_args()
    if a.torch_worker:
        return torch_worker([x for x in rest if x != "--"], a.autocast)
    if rest:
        ap.error("unknown arguments: " + " ".join(rest))
    blas = pytorch_blas()  # before any torch loads, here or in the workers
    print(blas, flush=True)

    import numpy as np
    work = tempfile.mkdtemp(prefix="dsc-bf16-")
    if not a.data:
        a.data = token_file(work)
    top_id = int(np.fromfile(a.data, dtype="<u2").max())
    if top_id >= VOCAB:
        sys.exit(f"bench: token id {top_id} in {a.data} >= vocab {VOCAB}")

    model = os.path.join(work, "model.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model] + MODEL_FLAGS)
    cfg = os.path.join(work, "ds_config.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1,
                   "steps_per_print": 1000,
                   # PyTorch's loop clips nothing; DeepSpeed (and dsc) clip
                   # at 1.0 unless told.
                   "gradient_clipping": 0.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": 0.0}}},
                  f)
    plans, explain = {}, {}
    for prec in ("bf16", "fp32"):
        for fuse in (("all", "attention,epilogues", "none") if prec == "bf16"
                     else ("all", "none")):
            tag = prec if fuse == "all" else prec + ("-unfused" if fuse == "none" else "-no-opt")
            plans[tag] = os.path.join(work, "plan-" + tag)
            explain[tag] = run([os.path.join(BIN, "dsc"), model, "--config", cfg,
                                "--precision", prec, "--fuse", fuse, "-o", plans[tag],
                                "--explain"])
    fpt, n_matmul = flops_per_token()
    # The unfused plan counts every GEMM as nn.matmul (the fused one
    # counts attention's inside nn.attention).
    m = re.search(r"nn\.matmul\s+\d+\s+([\d.]+)", explain["fp32-unfused"])
    dsc_gflop_step = float(m.group(1)) if m else float("nan")
    # The fused plan's GEMMs: nn.matmul and nn.matmul_epilogue.
    gemms = re.findall(r"nn\.matmul(?:_epilogue)?\s+\d+\s+([\d.]+)", explain["bf16"])
    fused_matmul_gflop = sum(float(g) for g in gemms) if gemms else float("nan")

    print(f"bench: bf16 GEMM peak ({a.threads} threads, square 512..{a.peak})", flush=True)
    squares, info = gemm_peak(a.threads, a.reps, a.ms, a.peak)
    pk_size = max(squares, key=squares.get)
    pk = squares[pk_size]
    print(f"  {', '.join(f'{s}^3 {v:.0f}' for s, v in sorted(squares.items()))} GFLOP/s",
          flush=True)

    runs = [("dsc bf16", lambda rnd: dsc_run(plans["bf16"], a, work, f"bf16-{rnd}")),
            ("dsc bf16 no fused optimizer",
             lambda rnd: dsc_run(plans["bf16-no-opt"], a, work, f"bf16-no-opt-{rnd}")),
            ("dsc bf16 unfused",
             lambda rnd: dsc_run(plans["bf16-unfused"], a, work, f"bf16-unfused-{rnd}")),
            ("PyTorch bf16 autocast", lambda rnd: torch_run(a, True)),
            ("dsc fp32", lambda rnd: dsc_run(plans["fp32"], a, work, f"fp32-{rnd}")),
            ("dsc fp32 unfused",
             lambda rnd: dsc_run(plans["fp32-unfused"], a, work, f"fp32-unfused-{rnd}")),
            ("PyTorch fp32", lambda rnd: torch_run(a, False))]
    best, all_steps = {}, {n: [] for n, _ in runs}
    for rnd in range(a.rounds):
        for name, fn in runs:
            r = fn(rnd)
            all_steps[name].append(r["step_s"])
            print(f"  round {rnd + 1} {name}: {BATCH * SEQ / r['step_s']:.0f} tok/s "
                  f"(median step {r['step_s'] * 1e3:.0f} ms), RSS {r['rss']:.0f} MiB, "
                  f"loss {r['loss_last']:.4f}", flush=True)
            if name not in best or r["step_s"] < best[name]["step_s"]:
                rss = max(r["rss"], best.get(name, {}).get("rss", 0))
                best[name] = dict(r, rss=rss)
            else:
                best[name]["rss"] = max(best[name]["rss"], r["rss"])

    prof = profile(plans["bf16"], a, work, "bf16")
    prof_unfused = profile(plans["bf16-unfused"], a, work, "bf16-unfused")

    tps = {n: BATCH * SEQ / r["step_s"] for n, r in best.items()}
    lines = [
        f"CPU: {cpu_text()}.",
        "",
        f"GPT {LAYERS} layers, d {D}, {HEADS} heads, seq {SEQ}, batch {BATCH}, vocab {VOCAB} "
        f"(tied head, erf GELU, dropout 0), AdamW, no clipping; {a.threads} threads; "
        f"the project's text as byte tokens; {a.warmup} untimed + {a.steps} timed steps per "
        f"run, median step, best of {a.rounds} alternating rounds. PyTorch "
        f"{__import__('torch').__version__}, both runs with torch.set_flush_denormal(True).",
        "",
        f"Model FLOPs per token: 6 x {n_matmul:,} (matmul weights: 12 L d^2 + d V) + "
        f"12 L d T ({12 * LAYERS * D * SEQ:,}) = {fpt / 1e6:.2f} MFLOP "
        f"({fpt * BATCH * SEQ / 1e9:.2f} GFLOP per step; dsc --explain counts "
        f"{dsc_gflop_step:.2f} GFLOP of nn.matmul per step).",
        f"bf16 GEMM peak, measured in this run (dsrt_gemm_bench, {info['bf16_gemm']}): "
        + ", ".join(f"{s}^3 {v:.0f}" for s, v in sorted(squares.items()))
        + f" GFLOP/s; **peak {pk:.0f} GFLOP/s**.",
        "",
        "| run | tok/s | step ms | GFLOP/s | MFU (of bf16 peak) | peak RSS MiB | "
        "dsrt's RSS / planned arena MiB | loss after last step |",
        "|---|---|---|---|---|---|---|---|"]
    for name, _ in runs:
        r = best[name]
        g = tps[name] * fpt / 1e9
        own = f"{r['own_rss']} / {r['arena']:.0f}" if r["arena"] is not None else "-"
        lines.append(f"| {name} | {tps[name]:.0f} | {r['step_s'] * 1e3:.0f} | {g:.0f} | "
                     f"{g / pk:.1%} | {r['rss']:.0f} | {own} | {r['loss_last']:.4f} |")
    b16, t16, b32 = tps["dsc bf16"], tps["PyTorch bf16 autocast"], tps["dsc fp32"]
    t32 = tps["PyTorch fp32"]
    mfu = b16 * fpt / 1e9 / pk

    def goal(x, bound):
        return f">= {bound}x ({'met' if x >= bound else 'not met'})"

    lines += [
        "",
        "| ratio | measured | goal |",
        "|---|---|---|",
        f"| dsc bf16 / PyTorch bf16 autocast | {b16 / t16:.2f}x | {goal(b16 / t16, 2.0)} "
        "(issue 47; 1.5x issue 12) |",
        f"| dsc fp32 / PyTorch fp32 eager | {b32 / t32:.2f}x | {goal(b32 / t32, 3.0)} "
        "(issue 47) |",
        f"| dsc bf16 fused / unfused | {b16 / tps['dsc bf16 unfused']:.2f}x | - |",
        f"| dsc bf16 fused / no fused optimizer (train.fused_adam) | "
        f"{b16 / tps['dsc bf16 no fused optimizer']:.2f}x | - |",
        f"| dsc fp32 fused / unfused | {b32 / tps['dsc fp32 unfused']:.2f}x | - |",
        f"| dsc bf16 / dsc fp32 | {b16 / b32:.2f}x | - |",
        f"| dsc bf16 MFU | {mfu:.1%} | >= 50% ({'met' if mfu >= 0.5 else 'not met'}) |",
        f"| PyTorch bf16 autocast / PyTorch fp32 | {t16 / t32:.2f}x | - |",
        "",
        "Each run's median step over the rounds, min / median / max (ms): " + "; ".join(
            f"{n} " + " / ".join(f"{x * 1e3:.0f}" for x in (
                min(all_steps[n]), statistics.median(all_steps[n]), max(all_steps[n])))
            for n, _ in runs) + ".",
        ""]
    for title, rows in (("dsc bf16 (fused)", prof), ("dsc bf16 unfused", prof_unfused)):
        lines += profile_table(title, rows, a)
    total = sum(r[2] for r in prof)
    mm = [r for r in prof if r[0] in ("nn.matmul", "nn.matmul_epilogue")]
    if mm:
        g_mm = fused_matmul_gflop * a.profile_steps / sum(r[2] for r in mm)
        lines += ["", f"Inside the profile the GEMMs (nn.matmul and nn.matmul_epilogue) "
                  f"run at {g_mm:.0f} GFLOP/s "
                  f"({g_mm / pk:.0%} of the bf16 peak); the whole step at "
                  f"{dsc_gflop_step * a.profile_steps / total:.0f} GFLOP/s."]
    report(blas + "\n\n" + "\n".join(lines) + "\n", a.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
