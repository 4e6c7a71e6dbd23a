#!/usr/bin/python3
"""Activation checkpointing, in one run: dsc --recompute vs torch.utils.checkpoint.

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/recompute.py --threads 2 [--markdown FILE]

One GPT (models/gpt.py, float32, dropout 0.1 so that recomputation has to
redraw the dropout masks; default 12 layers, d 768, 12 heads, seq 512,
batch 1, vocab 256), the same data (the project's text as byte tokens), the
same batch and threads, AdamW (lr 3e-4, no weight decay, no clipping):

* dsc + dsrt with `--recompute none`, `layers`, `selective`, and `auto` with
  `--memory-budget` halfway between the none and layers plans' planned
  peaks. For each: the planned peak (the arena of manifest.txt), its
  activation part (arena minus model state, the manifest's `activations`),
  the GFLOP the manifest says are recomputed, the measured peak RSS
  (`ru_maxrss` of the dsrt process, from os.wait4; dsrt prints the same
  figure), the median step time of the timed steps (dsrt's metrics.csv),
  and whether the trained weights are bitwise those of `none`.
* PyTorch eager (bench/train_pytorch.py's loop, flush-to-zero like dsrt)
  on the same model, without and with `torch.utils.checkpoint.checkpoint`
  (use_reentrant=False) around each transformer block: median step time
  and peak RSS (`ru_maxrss` of the process).

Each configuration runs `--warmup` untimed + `--steps` timed steps in its own
process; the six configurations alternate `--rounds` times and each keeps
its best (lowest) median step. Peak RSS is the largest over the rounds.

Where the planned activation bytes go: for each dsc plan the script also
reads `dsc --emit train` (the IR with the memory plan's train.offsets) and
computes, op by op in program order, the bytes of the live micro-batch
values (union of their arena intervals; a value lives from its op to its
last use, reshapes are views). It reports the step-long gradient sums
(the results of train.accumulate, live across the micro-batches; with one
micro-batch the gradients are their own sums and count as micro-batch
values, live from where the backward pass computes them), the peak
of the micro-batch values, and the peak of those values other than the
parameter gradients the micro-batch yields -- the forward activations kept
for (or recomputed in) the backward pass, which is what checkpointing can
cut.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from math import prod

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, PY, REPO, pytorch_blas, dsrt_peak_rss, median_step, metrics,  # noqa: E402
                    report, run, run_measured, sha256, token_file)

MODES = ["none", "layers", "selective", "auto"]
MiB = 2.0 ** 20


# --------------------------------------------------------------------------
# PyTorch worker (this script re-run as a child process)

def torch_worker(argv):
    """`recompute.py --torch-worker [--checkpoint] TRAIN_PYTORCH_ARGS...`:
    bench/train_pytorch.py's main() on models/gpt.py's model, with each
    transformer block wrapped in torch.utils.checkpoint when asked."""
    ckpt = "--checkpoint" in argv
    argv = [x for x in argv if x != "--checkpoint"]
    sys.path.insert(0, os.path.join(REPO, "models"))
    import gpt
    import train_pytorch
    if ckpt:
        import inspect
        import torch.utils.checkpoint as cp
        kw = ({"use_reentrant": False}
              if "use_reentrant" in inspect.signature(cp.checkpoint).parameters else {})
        build = gpt.build_model

        def build_checkpointed(a):
            model = build(a)
            for block in model.transformer.h:
                def forward(x, key_padding_mask=None, _f=block.forward):
                    return cp.checkpoint(_f, x, key_padding_mask, **kw)
                block.forward = forward  # nn.Module.__call__ finds the instance's
            return model
        gpt.build_model = build_checkpointed
    return train_pytorch.main(argv)


# --------------------------------------------------------------------------
# Manifests and the planned IR

def read_manifest(plan):
    m = open(os.path.join(plan, "manifest.txt")).read()
    num = lambda pat: int(re.search(pat, m).group(1))  # noqa: E731
    r = {"arena": num(r"arena:\s+(\d+) bytes"),
         "model_state": num(r"model state:\s+(\d+) bytes"),
         "activations": num(r"activations:\s+(\d+) bytes"),
         "gflop_added": 0.0, "recomputed_ops": 0, "recompute_line": ""}
    rc = re.search(r"recompute:\s+(.*)", m)
    if rc:
        r["recompute_line"] = rc.group(1).strip()
        r["gflop_added"] = float(re.search(r"([\d.]+) GFLOP added", rc.group(1)).group(1))
        r["recomputed_ops"] = int(re.search(r"(\d+) forward ops", rc.group(1)).group(1))
        r["chosen"] = rc.group(1).split(":")[0]
    return r


DTYPE_BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "i16": 2,
               "i8": 1, "ui8": 1, "i1": 1}


def tensor_bytes(t):
    parts = re.match(r"tensor<(.*)>", t).group(1).split("x")
    return prod(int(p) for p in parts[:-1]) * DTYPE_BYTES[parts[-1]]


def live_profile(ir_path):
    """From `dsc --emit train` output: (bytes of the gradient sums, peak
    bytes of live micro-batch values, peak bytes of live micro-batch values
    other than the yielded gradients, and where each peak and the backward
    pass (the first *_grad op) are, as fractions of the micro-batch's ops)."""
    lines = open(ir_path).read().split("\n")
    start = next(i for i, l in enumerate(lines) if "train.accumulate" in l)
    end = next(i for i in range(start, len(lines)) if "train.yield" in lines[i])
    count = int(re.search(r"train\.accumulate (\d+)", lines[start]).group(1))
    sums = re.findall(r"tensor<[^>]*>", lines[start].split("->", 1)[1].split("{")[0])
    # With one micro-batch the yielded values are their sums (memory-plan's
    # AccumulateOp::isSumInPlace): no separate step-long sums; they live
    # from their definition to the end of the micro-batch. With more, each
    # is added to its sum at its last other use and dies there.
    sum_bytes = sum(tensor_bytes(t) for t in sums) if count > 1 else 0
    defs, uses, alias, yielded, bwd = {}, {}, {}, [], None
    for idx, line in enumerate(lines[start + 1:end + 1]):
        s = line.strip()
        if s.startswith("train.yield"):
            yielded = re.findall(r"%[\w#]+", s.split(" : ")[0])
            if count == 1:
                for v in yielded:
                    uses[v] = idx
            continue
        if not s.startswith("%") or " = " not in s:
            continue
        lhs, rhs = s.split(" = ", 1)
        op = rhs.split()[0]
        if op == "arith.constant":
            continue
        if bwd is None and op.endswith("_grad"):
            bwd = idx
        results = re.findall(r"%[\w#]+", lhs)
        operands = re.findall(r"%[\w#]+", rhs[len(op):].split(" {")[0].split(" : ")[0])
        for v in operands:
            uses[v] = idx
        offs = re.search(r"train\.offsets = array<i64: ([\d, ]+)>", rhs)
        offs = [int(x) for x in offs.group(1).split(",")] if offs else []
        sig = rhs.rsplit(" : ", 1)[-1]
        types = re.findall(r"tensor<[^>]*>", sig.split("->")[-1])
        if op == "nn.reshape":
            alias[results[0]] = operands[0]
            continue
        for k, v in enumerate(results):
            if k < len(offs) and k < len(types):
                defs[v] = (idx, offs[k], tensor_bytes(types[k]))
    root = lambda v: root(alias[v]) if v in alias else v  # noqa: E731
    last = {}
    for v, idx in uses.items():
        r = root(v)
        last[r] = max(last.get(r, -1), idx)
    grads = {root(v) for v in yielded}
    n = end - start
    live = [[] for _ in range(n + 1)]
    for v, (d, off, size) in defs.items():
        for i in range(d, max(d, last.get(v, d)) + 1):
            live[i].append((off, off + size, v in grads))

    def union(iv):
        total, hi = 0, -1
        for a, b in sorted(iv):
            if b > hi:
                total += b - max(a, hi)
                hi = b
        return total
    peak_all = peak_act = at_all = at_act = 0
    for i, iv in enumerate(live):
        total = union([(a, b) for a, b, _ in iv])
        if total > peak_all:
            peak_all, at_all = total, i
        act = union([(a, b) for a, b, g in iv if not g])
        if act > peak_act:
            peak_act, at_act = act, i
    n = max(n, 1)
    return sum_bytes, peak_all, at_all / n, peak_act, at_act / n, (bwd or 0) / n


# --------------------------------------------------------------------------

def label(c):
    kind, what = c
    if kind == "dsc":
        return "dsc " + what
    return "PyTorch" + (" + checkpoint" if what else "")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        return torch_worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--rounds", type=int, default=3,
                    help="times the six configurations alternate (best median kept)")
    ap.add_argument("--data", help="uint16 token file (default: built from the repo's text)")
    ap.add_argument("--work", help="folder for the model, plans and runs (default: a new temp dir)")
    ap.add_argument("--markdown", help="also write the tables here")
    a = ap.parse_args()
    blas = pytorch_blas()  # before torch loads

    work = a.work or tempfile.mkdtemp(prefix="dsc-recompute-")
    os.makedirs(work, exist_ok=True)
    if not a.data:
        a.data = token_file(work)
    gflags = ["--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads),
              "--vocab", str(a.vocab), "--seq", str(a.seq), "--batch", str(a.batch),
              "--dropout", str(a.dropout)]
    model = os.path.join(work, "model.onnx")
    print(run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model] + gflags).strip(),
          flush=True)
    cfg = os.path.join(work, "ds_config.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
                   "steps_per_print": 1000, "gradient_clipping": 0.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}}},
                  f)

    # Compile the four plans; auto's budget is halfway between none and layers.
    dsc = os.path.join(BIN, "dsc")
    plans, man, flags, notes = {}, {}, {}, {}
    for mode in MODES:
        if mode == "auto":
            budget = (man["none"]["arena"] + man["layers"]["arena"]) // 2
            flags[mode] = ["--recompute", "auto", "--memory-budget", str(budget)]
        else:
            flags[mode] = ["--recompute", mode]
        plans[mode] = os.path.join(work, "plan-" + mode)
        r = subprocess.run([dsc, model, "--config", cfg, "-o", plans[mode]] + flags[mode],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"bench: dsc {' '.join(flags[mode])} failed:\n{r.stdout}\n{r.stderr}")
        notes[mode] = r.stderr.strip()
        man[mode] = read_manifest(plans[mode])
        ir = os.path.join(work, f"train-{mode}.mlir")
        run([dsc, model, "--config", cfg, "--emit", "train", "--elide-constants", "16",
             "-o", ir] + flags[mode])
        man[mode]["live"] = live_profile(ir)
        print(f"dsc {' '.join(flags[mode])}: arena {man[mode]['arena'] / MiB:.1f} MiB, "
              f"activations {man[mode]['activations'] / MiB:.1f} MiB"
              + (f" [{notes[mode]}]" if notes[mode] else ""), flush=True)

    configs = [("dsc", m) for m in MODES] + [("torch", False), ("torch", True)]
    res = {c: {"medians": [], "rss": [], "rss_dsrt": [], "other": []} for c in configs}
    for rnd in range(a.rounds):
        for c in configs:
            kind, what = c
            tag = f"{kind}-{what}-r{rnd}"
            if kind == "dsc":
                outdir = os.path.join(work, "run-" + tag)
                out, rss, other, _ = run_measured(
                    [os.path.join(BIN, "dsrt"), plans[what], "--data", a.data, "--steps",
                     str(a.warmup + a.steps), "--threads", str(a.threads), "--out", outdir],
                    os.path.join(work, tag + ".log"))
                rows = metrics(outdir)
                med = median_step(rows, a.warmup)
                res[c]["rss_dsrt"].append(dsrt_peak_rss(out))
                res[c]["losses"] = [r["loss"] for r in rows]
                res[c]["weights"] = sha256(os.path.join(outdir, "weights.safetensors"))
            else:
                cmd = [PY, os.path.abspath(__file__), "--torch-worker"] + (
                    ["--checkpoint"] if what else []) + [
                    "--data", a.data, "--threads", str(a.threads), "--steps", str(a.steps),
                    "--warmup-steps", str(a.warmup), "--flush-denormal", "--"] + gflags
                out, rss, other, _ = run_measured(cmd, os.path.join(work, tag + ".log"))
                j = json.loads(out.strip().splitlines()[-1])
                med = j["step_time_median_s"]
                res[c]["losses"] = [j["loss_first"], j["loss_last"]]
            res[c]["medians"].append(med)
            res[c]["rss"].append(rss)
            res[c]["other"].append(other)
            print(f"round {rnd + 1}: {label(c)}: median step {med * 1000:.0f} ms, "
                  f"peak RSS {rss:.0f} MiB, other processes {other:.2f} cores", flush=True)

    best = {c: min(res[c]["medians"]) for c in configs}
    rss = {c: max(res[c]["rss"]) for c in configs}
    n0 = ("dsc", "none")
    act0 = man["none"]["activations"]
    lines = [
        "| run | planned peak MiB | planned activations MiB | activation reduction "
        "| GFLOP recomputed | peak RSS MiB | RSS / plan | step ms | step time ratio "
        "| weights = none's |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for mode in MODES:
        m, c = man[mode], ("dsc", mode)
        name = f"dsc `--recompute {mode}`"
        if mode == "auto":
            name += (f" `--memory-budget {int(flags[mode][-1])}` "
                     f"({int(flags[mode][-1]) / MiB:.0f} MiB; chose {m.get('chosen', 'none')})")
        same = "yes" if res[c]["weights"] == res[n0]["weights"] else "NO"
        lines.append(
            f"| {name} | {m['arena'] / MiB:.0f} | {m['activations'] / MiB:.0f} | "
            f"{act0 / m['activations']:.2f}x | {m['gflop_added']:.1f} | {rss[c]:.0f} | "
            f"{rss[c] / (m['arena'] / MiB):.2f} | {best[c] * 1000:.0f} | "
            f"{best[c] / best[n0]:.2f}x | {same} |")
    t0, t1 = ("torch", False), ("torch", True)
    for c, name in ((t0, "PyTorch eager"),
                    (t1, "PyTorch eager + `checkpoint` per block")):
        lines.append(f"| {name} | - | - | - | - | {rss[c]:.0f} | - | {best[c] * 1000:.0f} | "
                     f"{best[c] / best[t0]:.2f}x | - |")

    blines = ["| plan | gradient sums MiB | micro-batch values, peak MiB (at) | "
              "activations other than gradients, peak MiB (at) | reduction of the latter | "
              "backward starts at |",
              "|---|---|---|---|---|---|"]
    kept0 = man["none"]["live"][3]
    for mode in MODES:
        sums, allv, at_all, kept, at_act, bwd = man[mode]["live"]
        blines.append(f"| {mode} | {sums / MiB:.0f} | {allv / MiB:.0f} ({at_all:.2f}) | "
                      f"{kept / MiB:.0f} ({at_act:.2f}) | {kept0 / kept:.2f}x | {bwd:.2f} |")

    ratios = [
        "| ratio | measured | goal (issue 13) |",
        "|---|---|---|",
        f"| layers: activation reduction / step time | {act0 / man['layers']['activations']:.2f}x"
        f" / {best[('dsc', 'layers')] / best[n0]:.2f}x | >= 3x / <= 1.4x |",
        f"| selective: activation reduction / step time | "
        f"{act0 / man['selective']['activations']:.2f}x / "
        f"{best[('dsc', 'selective')] / best[n0]:.2f}x | >= 2x / <= 1.1x |",
        f"| auto (halfway budget) step / layers step | "
        f"{best[('dsc', 'auto')] / best[('dsc', 'layers')]:.2f}x | < 1 |",
        f"| PyTorch checkpoint / no checkpoint: step time / peak RSS | "
        f"{best[t1] / best[t0]:.2f}x / {rss[t1] / rss[t0]:.2f}x | - |",
        f"| dsc none / PyTorch eager: step time / peak RSS | "
        f"{best[n0] / best[t0]:.2f}x / {rss[n0] / rss[t0]:.2f}x | - |",
    ]
    per_round = "; ".join(
        f"{label(c)}: " + ", ".join(f"{x * 1000:.0f}" for x in res[c]["medians"])
        for c in configs)
    others = [x for c in configs for x in res[c]["other"]]
    torch_same = res[t0]["losses"] == res[t1]["losses"]
    text = (f"GPT {a.layers} layers, d {a.d_model}, {a.heads} heads, seq {a.seq}, batch "
            f"{a.batch}, vocab {a.vocab}, dropout {a.dropout}, float32, AdamW; "
            f"{a.threads} threads; {a.warmup} untimed + {a.steps} timed steps per run, "
            f"best median of {a.rounds} rounds\n\n"
            + "\n".join(lines) + "\n\n" + "\n".join(ratios) + "\n\n"
            + "Where dsc's planned activation bytes go (`dsc --emit train`, live values "
              "op by op; at = where the peak is, as a fraction of the micro-batch's "
              "ops):\n\n" + "\n".join(blines) + "\n\n"
            + f"Median step per round (ms): {per_round}.\n"
            + f"Other processes kept {statistics.mean(others):.2f} cores busy on average "
              f"during the runs (at most {max(others):.2f}, /proc/stat minus the run's own "
              "CPU time).\n"
            + "dsrt's own peak RSS figures (MiB): "
            + ", ".join(f"{m} {max(res[('dsc', m)]['rss_dsrt'])}" for m in MODES) + ".\n"
            + f"PyTorch first/last loss without checkpoint {res[t0]['losses']}, with "
              f"{res[t1]['losses']} ({'identical' if torch_same else 'different'}).\n"
            + f"dsc losses per step (none): {', '.join(res[n0]['losses'])}.\n"
            + "".join(f"dsc {m}: {notes[m]}\n" for m in MODES if notes[m]))
    report(blas + "\n\n" + text, a.markdown)
    print(f"(work folder: {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
