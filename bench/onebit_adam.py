#!/usr/bin/python3
"""1-bit Adam on this machine: the compressed all-reduce against the fp32 one
(bytes and time per step) on 2 and 4 local ranks, and its convergence
against AdamW on the bundled GPT, in one run.

    /usr/bin/python3 bench/onebit_adam.py [--steps 24] [--converge-steps 300] [--markdown FILE]

1. Communication. Model: models/gpt.py, 6 layers, d=384, vocab 256, seq 128,
   micro-batch 4, fp32, dropout 0; data: the project's own text as byte
   tokens. Each run is one dsrt run of OneBitAdam with freeze_step
   steps/3: its warm-up steps all-reduce the fp32 gradients, its compressed
   steps send the packed signs (the same run, the same ranks), so the
   phases' bytes (metrics.csv comm_bytes, what dsrt's communicator counted)
   and mean step times compare side by side. AdamW (ZeRO 0) on the same
   ranks is the fp32 step of the usual optimizer. 4 ranks oversubscribe this
   machine's cores when it has 2: their times say little, their bytes hold.
2. Convergence: the README's main job (scripts/run-main.sh: the bundled GPT,
   4 layers, d=128, byte tokens of the project's text, 2 ranks, its
   WarmupCosineLR over 300 steps) trained with AdamW at ZeRO 0 and with
   OneBitAdam (the same lr, betas, weight decay and schedule; freeze_step
   15%, 30% and 50% of the steps: DeepSpeed's tutorial advises 15-25% of a
   long run), with ZeroOneAdam (0/1 Adam: var_freeze_step 30% of the
   steps, DeepSpeed's other defaults, so after the freeze every step is a
   local step with a sync) and with OneBitLamb (freeze_step 30%, the same
   lr), from the same weights on the same data: the mean loss of the last
   20 steps of each, and the bytes of the last step.
"""
import argparse
import csv
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, REPO, report, run, token_file  # noqa: E402
MODEL = ["--layers", "6", "--d-model", "384", "--heads", "6", "--vocab", "256", "--seq", "128"]
MICRO = 4


def dsrt_run(work, name, model, data, cfg, dp, steps, threads=1):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "ds_config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    plan = os.path.join(d, "plan")
    run([os.path.join(BIN, "dsc"), model, "--config", path, "--dp", str(dp), "-o", plan])
    run([os.path.join(BIN, "dsrt"), plan, "--data", data, "--steps", str(steps), "--threads",
         str(threads), "--out", os.path.join(d, "run")])
    with open(os.path.join(d, "run", "metrics.csv")) as f:
        return list(csv.DictReader(f)), open(os.path.join(plan, "manifest.txt")).read()


def phase(rows, first, last):
    rs = [r for r in rows if first <= int(r["step"]) <= last]
    return {"bytes": statistics.mean(float(r["comm_bytes"]) for r in rs),
            "calls": statistics.mean(float(r["comm_calls"]) for r in rs),
            "step_s": statistics.mean(float(r["step_time_s"]) for r in rs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--converge-steps", type=int, default=300)
    ap.add_argument("--freeze-fractions", type=lambda t: [float(x) for x in t.split(",")],
                    default=[0.15, 0.3, 0.5],
                    help="OneBitAdam's freeze_step as fractions of --converge-steps")
    ap.add_argument("--markdown", help="also write the tables here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dsc-bench-onebit-")
    data = token_file(work)
    model = os.path.join(work, "gpt.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model, "--dropout", "0",
         "--dynamic-batch", "--batch", str(MICRO)] + MODEL)

    freeze = a.steps // 3
    lines = ["| ranks | run | steps | bytes / step | calls / step | vs fp32 all-reduce bytes | "
             "step s | vs warm-up step |", "|---|---|---|---|---|---|---|---|"]
    for dp in (2, 4):
        base = {"train_micro_batch_size_per_gpu": MICRO, "gradient_accumulation_steps": 1,
                "train_batch_size": MICRO * dp, "steps_per_print": 1000,
                "gradient_clipping": 1.0}
        onebit = dict(base, optimizer={"type": "OneBitAdam",
                                       "params": {"lr": 3e-4, "freeze_step": freeze}})
        rows, _ = dsrt_run(work, f"onebit-dp{dp}", model, data, onebit, dp, a.steps)
        warm = phase(rows, 3, freeze)
        comp = phase(rows, freeze + 3, a.steps)
        adamw = dict(base, optimizer={"type": "AdamW", "params": {"lr": 3e-4}})
        arows, _ = dsrt_run(work, f"adamw-dp{dp}", model, data, adamw, dp, a.steps)
        fp32 = phase(arows, 3, a.steps)
        for name, steps, p in ((f"OneBitAdam warm-up (fp32 all-reduce)", f"3-{freeze}", warm),
                               (f"OneBitAdam compressed", f"{freeze + 3}-{a.steps}", comp),
                               ("AdamW, ZeRO 0", f"3-{a.steps}", fp32)):
            lines.append(f"| {dp} | {name} | {steps} | {p['bytes']:,.0f} | {p['calls']:.0f} | "
                         f"1/{warm['bytes'] / p['bytes']:.1f} | {p['step_s']:.3f} | "
                         f"{p['step_s'] / warm['step_s']:.2f}x |")
            print(lines[-1], flush=True)
    table1 = "\n".join(lines)

    # Convergence on the README's main job.
    mwork = os.path.join(work, "main")
    os.makedirs(mwork, exist_ok=True)
    run([PY, os.path.join(REPO, "models", "make_tokens.py"), "-o", os.path.join(mwork, "data")])
    mdata = os.path.join(mwork, "data", "train.bin")
    mmodel = os.path.join(mwork, "gpt.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "--size", "tiny", "--layers", "4",
         "--d-model", "128", "--heads", "4", "--vocab", "256", "--seq", "64", "--batch", "8",
         "--dropout", "0.1", "-o", mmodel])
    with open(os.path.join(REPO, "models", "configs", "gpt-main.json")) as f:
        main_cfg = json.load(f)
    main_cfg["scheduler"]["params"]["total_num_steps"] = a.converge_steps
    main_cfg["zero_optimization"] = {"stage": 0}
    p = main_cfg["optimizer"]["params"]
    runs = [("AdamW", main_cfg)]
    for fraction in a.freeze_fractions:
        freeze = max(2, int(a.converge_steps * fraction))
        runs.append((f"OneBitAdam, freeze_step {freeze} ({fraction:.0%})", dict(
            main_cfg, optimizer={"type": "OneBitAdam", "params": dict(p, freeze_step=freeze)})))
    freeze = max(2, int(a.converge_steps * 0.3))
    runs.append((f"ZeroOneAdam, var_freeze_step {freeze} (30%)", dict(
        main_cfg, optimizer={"type": "ZeroOneAdam", "params": dict(p, var_freeze_step=freeze)})))
    runs.append((f"OneBitLamb, freeze_step {freeze} (30%)", dict(
        main_cfg, optimizer={"type": "OneBitLamb", "params": dict(p, freeze_step=freeze)})))
    lines = ["| optimizer | steps | mean loss, last 20 steps | vs AdamW | bytes / step, last step |",
             "|---|---|---|---|---|"]
    results = {}
    for k, (name, cfg) in enumerate(runs):
        rows, _ = dsrt_run(work, f"converge{k}", mmodel, mdata, cfg, 2, a.converge_steps)
        loss = statistics.mean(float(r["loss"]) for r in rows[-20:])
        results[name] = loss
        base_loss = results.get("AdamW", loss)
        lines.append(f"| {name} | {a.converge_steps} | {loss:.4f} | "
                     f"{100 * (loss - base_loss) / base_loss:+.2f}% | "
                     f"{float(rows[-1]['comm_bytes']):,.0f} |")
        print(lines[-1], flush=True)
    table2 = "\n".join(lines)
    report("## The compressed all-reduce against the fp32 one\n\n" + table1 +
           "\n\n## Convergence on the main job (2 ranks)\n\n" + table2 + "\n", a.markdown)


if __name__ == "__main__":
    main()
