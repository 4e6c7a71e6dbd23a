#!/usr/bin/python3
"""Tensor parallelism against data parallelism, in one run: dsc --tp 2 vs
--dp 2 vs one rank, step time and memory per rank (issue 16).

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/tensor_parallel.py [--markdown FILE]

One GPT (models/gpt.py, float32, dropout 0, tied head; default 6 layers,
d 768, 12 heads, seq 256, micro-batch 2, vocab 256), the same data (byte
tokens of /usr/share/common-licenses), AdamW (lr 3e-4, no weight decay, no
clipping), the same global batch of 2 micro-batches per step:

* one rank: 2 micro-batches (gradient accumulation 2), --threads T;
* dp 2, ZeRO 0: one micro-batch per rank, --threads T/2 each; the
  gradients all-reduced in buckets of --bucket elements (overlap_comm);
* tp 2 (Megatron's column/row GEMM splits): both micro-batches on every
  rank, each rank half of every split GEMM, --threads T/2 each;
* PyTorch eager, one process, the whole global batch as one batch,
  --threads T (bench/train_pytorch.py, flush-to-zero like dsrt); --no-torch
  leaves it out.

For each: the median step time of the timed steps (dsrt's metrics.csv;
PyTorch's own median) and tokens/s from it; the planned arena per rank and
its model state (manifest.txt); the measured peak RSS per rank, twice:
during training (dsrt's own `peak RSS`, ru_maxrss when the steps are done,
the largest rank's) and of the whole process (VmHWM of each rank's process,
sampled every 50 ms from the pids dsrt writes to RUN/ranks/N.pid until it
exits; one rank: ru_maxrss from os.wait4), which also holds what dsrt
allocates after the steps to gather the whole trained tensors for
weights.safetensors; the parameter elements per rank (the manifest's
`parameters per rank` for tp, `parameters` otherwise) against the formula

    P/tp + R (1 - 1/tp),  i.e. (P - R)/tp + R,

where R are the parameters every tp rank holds whole: the token and
position embeddings (the tied LM head is the token embedding), every layer
norm's weight and bias, and the biases of the row-parallel GEMMs (attention
and MLP output projections, added once after the all-reduce). R is counted
from the ONNX model's initializers by name; the manifest's split/whole
figures are dsc's own. And the communication per step dsrt counted, in the
ZeRO paper's units (an all-reduce of n elements counts 2n), against the
formulas: tp (Megatron): per layer and micro-batch 2 all-reduces forward
(after the attention and MLP row-parallel GEMMs) and 2 backward (the input
gradients of the column-parallel GEMMs), each of b*s*h elements, plus one
1-element all-reduce of the gradient norm's square sum: 4 L m + 1 calls,
2 (4 L m b s h + 1) elements; dp ZeRO 0: an all-reduce of the P gradients
(in the manifest's buckets), 2P elements.

Each configuration runs --warmup untimed + --steps timed steps in its own
process; the configurations alternate --rounds times and each keeps its
best (lowest) median step. Peak RSS is the largest over the rounds. The
losses of dp 2 and tp 2 are compared with one rank's (same global batch,
dropout 0: they should agree to float32 rounding).
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, PY, REPO, MiB, dsrt_comm, dsrt_peak_rss,  # noqa: E402
                    median_step, metrics, report, run, run_measured, token_file)

CONFIGS = ["one", "dp2", "tp2"]
LABEL = {"one": "dsc, 1 rank (GA 2)", "dp2": "dsc, dp 2 (ZeRO 0)", "tp2": "dsc, tp 2 (GA 2)",
         "torch": "PyTorch eager, 1 process"}


def read_manifest(plan):
    """The figures of a plan's manifest.txt this bench reports."""
    m = open(os.path.join(plan, "manifest.txt")).read()
    num = lambda pat: int(re.search(pat, m, re.M).group(1))  # noqa: E731
    r = {"arena": num(r"^arena:\s+(\d+) bytes"),
         "model_state": num(r"^\s+model state:\s+(\d+) bytes"),
         "activations": num(r"^\s+activations:\s+(\d+) bytes"),
         "params": num(r"^parameters:\s+(\d+) in"),
         "text": m}
    tp = re.search(r"parameters per rank: (\d+) of (\d+) \([\d.]+%; (\d+) split 1/(\d+), "
                   r"(\d+) whole on every rank\)", m)
    if tp:
        r["tp_params"], r["tp_total"], r["tp_split"], r["tp"], r["tp_whole"] = (
            int(x) for x in tp.groups())
        r["tp_line"] = re.search(r"^tensor parallel:\s+(.*)$", m, re.M).group(1)
        r["tp_whole_why"] = re.findall(r"^\s+whole: (.*)$", m, re.M)
        c = re.search(r"tp communication per step: (\d+) all-reduces of (\d+) elements "
                      r"\((\d+) in", m)
        r["tp_comm"] = (int(c.group(1)), int(c.group(3)))
    dp = re.search(r"^\s+total: (\d+) calls?, (\d+) elements", m, re.M)
    if dp:
        r["dp_comm"] = (int(dp.group(1)), int(dp.group(2)))
    return r


def replicated(model_path):
    """(P, {kind: elements}) of the ONNX model's trainable initializers (the
    .weight and .bias tensors; attention masks are buffers): the kinds a tp
    rank holds whole, by name."""
    import onnx
    from math import prod
    m = onnx.load(model_path, load_external_data=False)
    total, kinds = 0, {"embeddings (wte = tied LM head, wpe)": 0, "layer norms": 0,
                       "row-parallel biases (attn.c_proj, mlp.c_proj)": 0}
    for t in m.graph.initializer:
        if not t.name.endswith((".weight", ".bias")):
            continue
        n = prod(t.dims)
        total += n
        if t.name.endswith(("wte.weight", "wpe.weight")):
            kinds["embeddings (wte = tied LM head, wpe)"] += n
        elif re.search(r"\.ln_(1|2|f)\.", t.name):
            kinds["layer norms"] += n
        elif t.name.endswith("c_proj.bias"):
            kinds["row-parallel biases (attn.c_proj, mlp.c_proj)"] += n
    return total, kinds


def config(path, micro, ga, dp, bucket):
    with open(path, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": ga,
                   "train_batch_size": micro * ga * dp, "steps_per_print": 1000,
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}},
                   "zero_optimization": {"stage": 0, "overlap_comm": True,
                                         "reduce_bucket_size": bucket}}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2,
                    help="cores: one rank runs this many threads, each of 2 ranks half")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=2, help="micro-batch (global batch: 2x)")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--bucket", type=int, default=10 ** 7,
                    help="dp 2's reduce_bucket_size in elements (its gradient all-reduce "
                         "staging, planned in the arena; DeepSpeed's default 5e8 stages all "
                         "P gradients at once)")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--rounds", type=int, default=3,
                    help="times the configurations alternate (best median kept)")
    ap.add_argument("--no-torch", action="store_true", help="leave out PyTorch eager")
    ap.add_argument("--data", help="uint16 token file (default: /usr/share/common-licenses "
                                   "as byte tokens)")
    ap.add_argument("--work", help="folder for the model, plans and runs (default: a new temp dir)")
    ap.add_argument("--markdown", help="also write the tables here")
    a = ap.parse_args()
    if a.threads < 2 or a.threads % 2:
        sys.exit("bench: --threads must be even (2 ranks get half each)")

    work = a.work or tempfile.mkdtemp(prefix="dsc-tp-")
    os.makedirs(work, exist_ok=True)
    if not a.data:
        a.data = token_file(work, ["/usr/share/common-licenses"])
    gflags = ["--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads),
              "--vocab", str(a.vocab), "--seq", str(a.seq), "--dropout", "0"]
    model = os.path.join(work, "model.onnx")
    print(run([PY, os.path.join(REPO, "models", "gpt.py"), "-o", model, "--batch", str(a.batch)]
              + gflags).strip(), flush=True)
    P, kinds = replicated(model)
    R = sum(kinds.values())

    # The plans: (config, ga, dp, dsc flags, threads per rank, ranks).
    setup = {"one": (2, 1, [], a.threads, 1),
             "dp2": (1, 2, ["--dp", "2"], a.threads // 2, 2),
             "tp2": (2, 1, ["--tp", "2"], a.threads // 2, 2)}
    plans, man = {}, {}
    for c in CONFIGS:
        ga, dp, flags, _, _ = setup[c]
        cfg = os.path.join(work, f"ds_config-{c}.json")
        config(cfg, a.batch, ga, dp, a.bucket)
        plans[c] = os.path.join(work, "plan-" + c)
        run([os.path.join(BIN, "dsc"), model, "--config", cfg, "-o", plans[c]] + flags)
        man[c] = read_manifest(plans[c])
        print(f"dsc {' '.join(flags) or '(one rank)'}: arena {man[c]['arena'] / MiB:.1f} MiB per "
              f"rank, model state {man[c]['model_state'] / MiB:.1f} MiB", flush=True)
    if man["one"]["params"] != P:
        print(f"bench: note: the manifest's P ({man['one']['params']}) is not the ONNX "
              f"model's .weight/.bias total ({P})", flush=True)

    configs = CONFIGS + ([] if a.no_torch else ["torch"])
    res = {c: {"medians": [], "rss": [], "wait4": [], "dsrt_rss": [], "other": []}
           for c in configs}
    tokens = 2 * a.batch * a.seq
    for rnd in range(a.rounds):
        for c in configs:
            tag = f"{c}-r{rnd}"
            if c == "torch":
                cmd = [PY, os.path.join(REPO, "bench", "train_pytorch.py"), "--data", a.data,
                       "--threads", str(a.threads), "--steps", str(a.steps), "--warmup-steps",
                       str(a.warmup), "--flush-denormal", "--batch", str(2 * a.batch),
                       "--"] + gflags
                out, rss, other, _ = run_measured(cmd, os.path.join(work, tag + ".log"))
                j = json.loads(out.strip().splitlines()[-1])
                med = j["step_time_median_s"]
                res[c]["losses"] = [j["loss_first"], j["loss_last"]]
                per_rank = {0: rss}
            else:
                outdir = os.path.join(work, "run-" + tag)
                out, rss, other, per_rank = run_measured(
                    [os.path.join(BIN, "dsrt"), plans[c], "--data", a.data, "--steps",
                     str(a.warmup + a.steps), "--threads", str(setup[c][3]), "--out", outdir],
                    os.path.join(work, tag + ".log"),
                    rank_pids=os.path.join(outdir, "ranks", "*.pid"))
                if not per_rank:  # one rank: dsrt runs in this process, no pid files
                    per_rank = {0: rss}
                rows = metrics(outdir)
                med = median_step(rows, a.warmup)
                res[c]["losses"] = [float(r["loss"]) for r in rows]
                res[c]["comm"] = dsrt_comm(out)
                res[c]["dsrt_rss"].append(dsrt_peak_rss(out))
                os.unlink(os.path.join(outdir, "weights.safetensors"))
            res[c]["medians"].append(med)
            res[c]["rss"].append(per_rank)
            res[c]["wait4"].append(rss)
            res[c]["other"].append(other)
            print(f"round {rnd + 1}: {LABEL[c]}: median step {med * 1000:.0f} ms, peak RSS "
                  + "/".join(f"{per_rank[k]:.0f}" for k in sorted(per_rank))
                  + f" MiB, other processes {other:.2f} cores", flush=True)

    best = {c: min(res[c]["medians"]) for c in configs}
    rss = {c: {k: max(r.get(k, 0.0) for r in res[c]["rss"]) for k in res[c]["rss"][0]}
           for c in configs}
    rss_max = {c: max(rss[c].values()) for c in configs}
    dsrt_rss = {c: max(res[c]["dsrt_rss"]) for c in CONFIGS}
    params = {"one": man["one"]["params"], "dp2": man["dp2"]["params"],
              "tp2": man["tp2"].get("tp_params", man["tp2"]["params"])}
    formula = {"one": P, "dp2": P, "tp2": (P - R) // 2 + R}

    # Communication formulas (ZeRO units).
    L, m, bsh = a.layers, 2, a.batch * a.seq * a.d_model
    comm_formula = {"one": (0, 0), "dp2": (man["dp2"]["dp_comm"][0], 2 * P),
                    "tp2": (4 * L * m + 1, 2 * (4 * L * m * bsh + 1))}

    def comm_text(c):
        d = res[c].get("comm", {})
        if not d:
            return "none"
        return ", ".join(f"{k} {n} call{'s' if n != 1 else ''} {e:,}" for k, (n, e) in d.items())

    def comm_total(c):
        d = res[c].get("comm", {})
        return sum(n for n, _ in d.values()), sum(e for _, e in d.values())

    lines = ["| run | ranks x threads | micro-batch x GA per rank | step ms | tokens/s "
             "| vs 1 rank | planned arena per rank MiB | of it model state MiB "
             "| peak RSS per rank MiB, training (dsrt) | RSS / arena "
             "| peak RSS per rank MiB, whole process | parameters per rank "
             "| communication per step (dsrt) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in CONFIGS:
        ga, dp, _, th, ranks = setup[c]
        mm = man[c]
        lines.append(
            f"| {LABEL[c]} | {ranks} x {th} | {a.batch} x {ga} | {best[c] * 1000:.0f} | "
            f"{tokens / best[c]:.0f} | {best['one'] / best[c]:.2f}x | {mm['arena'] / MiB:.0f} | "
            f"{mm['model_state'] / MiB:.0f} | {dsrt_rss[c]} | "
            f"{dsrt_rss[c] / (mm['arena'] / MiB):.2f} | "
            + " / ".join(f"{rss[c][k]:.0f}" for k in sorted(rss[c]))
            + f" | {params[c]:,} | {comm_text(c)} |")
    if "torch" in configs:
        lines.append(f"| {LABEL['torch']}, batch {2 * a.batch} | 1 x {a.threads} | "
                     f"{2 * a.batch} x 1 | {best['torch'] * 1000:.0f} | "
                     f"{tokens / best['torch']:.0f} | {best['one'] / best['torch']:.2f}x | - | - | "
                     f"- | - | {rss_max['torch']:.0f} | {P:,} | - |")

    plines = ["| run | parameters per rank (manifest) | formula | value | equal |",
              "|---|---|---|---|---|"]
    for c, f in (("one", "P"), ("dp2", "P (ZeRO 0: every rank holds all)"),
                 ("tp2", "(P - R)/2 + R")):
        plines.append(f"| {LABEL[c]} | {params[c]:,} | {f} | {formula[c]:,} | "
                      f"{'yes' if params[c] == formula[c] else 'NO'} |")
    rlines = ["| replicated on every tp rank (R) | elements |", "|---|---|"]
    rlines += [f"| {k} | {v:,} |" for k, v in kinds.items()]
    rlines.append(f"| R, total | {R:,} ({R / P:.2%} of P = {P:,}) |")

    clines = ["| run | dsrt measured: calls / elements | formula | formula: calls / elements "
              "| equal | dsc planned (manifest) |",
              "|---|---|---|---|---|---|"]
    ftext = {"one": "none",
             "dp2": f"all-reduce of the P gradients, 2P, in buckets of <= {a.bucket:,} "
                    "elements (calls: the manifest's buckets)",
             "tp2": f"4 L m + 1 calls, 2 (4 L m b s h + 1) with L={L}, m={m}, b*s*h="
                    f"{a.batch}*{a.seq}*{a.d_model}={bsh:,}"}
    for c in CONFIGS:
        got = comm_total(c)
        planned = man[c].get("tp_comm") or man[c].get("dp_comm") or (0, 0)
        clines.append(f"| {LABEL[c]} | {got[0]} / {got[1]:,} | {ftext[c]} | "
                      f"{comm_formula[c][0]} / {comm_formula[c][1]:,} | "
                      f"{'yes' if got == comm_formula[c] else 'NO'} | "
                      f"{planned[0]} / {planned[1]:,} |")

    def ratio(x, y):
        return f"{x / y:.2f}x"
    arena = {c: man[c]["arena"] for c in CONFIGS}
    state = {c: man[c]["model_state"] for c in CONFIGS}
    act = {c: man[c]["activations"] for c in CONFIGS}
    ratios = ["| ratio | tp 2 / dp 2 | tp 2 / 1 rank | dp 2 / 1 rank |", "|---|---|---|---|"]
    for name, d in (("step time", best), ("planned arena per rank", arena),
                    ("planned model state per rank", state),
                    ("planned activations per rank", act),
                    ("peak RSS per rank, training (dsrt, largest rank)", dsrt_rss),
                    ("peak RSS per rank, whole process (largest rank)", rss_max),
                    ("parameters per rank", params)):
        ratios.append(f"| {name} | {ratio(d['tp2'], d['dp2'])} | {ratio(d['tp2'], d['one'])} "
                      f"| {ratio(d['dp2'], d['one'])} |")

    def losses_vs_one(c):
        x, y = res[c]["losses"], res["one"]["losses"]
        return max(abs(p - q) / abs(q) for p, q in zip(x, y))
    per_round = "; ".join(f"{LABEL[c]}: " + ", ".join(f"{x * 1000:.0f}" for x in res[c]["medians"])
                          for c in configs)
    others = [x for c in configs for x in res[c]["other"]]
    text = (f"GPT {a.layers} layers, d {a.d_model}, {a.heads} heads, seq {a.seq}, vocab "
            f"{a.vocab}, tied head, dropout 0, float32, AdamW; P = {P:,} parameters; dp 2 "
            f"buckets of {a.bucket:,} elements; global "
            f"batch {2 * a.batch} x {a.seq} = {tokens} tokens per step; {a.threads} cores; "
            f"{a.warmup} untimed + {a.steps} timed steps per run, best median of {a.rounds} "
            "rounds\n\n"
            + "\n".join(lines) + "\n\n" + "\n".join(ratios) + "\n\n"
            + "Parameters per rank (R: what every tp rank holds whole):\n\n"
            + "\n".join(plines) + "\n\n" + "\n".join(rlines) + "\n\n"
            + f"dsc's tp plan: {man['tp2']['tp_line']}; "
              f"{man['tp2'].get('tp_split', 0):,} split elements per rank, "
              f"{man['tp2'].get('tp_whole', 0):,} whole"
            + "".join(f"; whole: {w}" for w in man["tp2"].get("tp_whole_why", [])) + ".\n\n"
            + "Communication per step (ZeRO units: an all-reduce of n elements counts 2n):\n\n"
            + "\n".join(clines) + "\n\n"
            + f"Median step per round (ms): {per_round}.\n"
            + "Peak RSS per rank, training: dsrt's own figure (ru_maxrss when the steps are "
              "done, the largest rank's; before dsrt gathers the whole trained tensors to "
              "write weights.safetensors). Whole process: VmHWM of each rank sampled every "
              "50 ms until it exits (rank 0 / rank 1; one rank: ru_maxrss from wait4), the "
              "final gather included. Largest of the rounds. ru_maxrss from wait4 (the "
              "largest process of the tree: on 2 ranks the launcher, mpirun or a rank) "
            + ", ".join(f"{c} {max(res[c]['wait4']):.0f}" for c in configs) + " MiB.\n"
            + f"Losses against one rank's, largest relative difference over the steps: dp 2 "
              f"{losses_vs_one('dp2'):.1e}, tp 2 {losses_vs_one('tp2'):.1e}.\n"
            + f"Other processes kept {statistics.mean(others):.2f} cores busy on average "
              f"during the runs (at most {max(others):.2f}, /proc/stat minus the run's own "
              "CPU time).\n")
    report(text, a.markdown)
    print(f"(work folder: {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
