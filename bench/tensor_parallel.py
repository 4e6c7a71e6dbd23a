#!/usr/bin/python3
"""Tensor parallelism against data parallelism, in one run: dsc --tp 2 (with
and without --sequence-parallel) vs --dp 2 vs one rank, step time and memory
per rank (issue 16).

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/tensor_parallel.py [--markdown FILE]

One GPT (models/gpt.py, float32, dropout 0, tied head; default 6 layers,
d 768, 12 heads, seq 256, micro-batch 2, vocab 256), the same data (byte
tokens of /usr/share/common-licenses), AdamW (lr 3e-4, no weight decay, no
clipping), the same global batch of 2 micro-batches per step:

* one rank: 2 micro-batches (gradient accumulation 2), --threads T;
* dp 2, ZeRO 0: one micro-batch per rank, --threads T/2 each; the
  gradients all-reduced in buckets of --bucket elements (overlap_comm);
* tp 2 (Megatron's column/row GEMM splits, and the vocabulary-parallel
  embedding, tied LM head and cross-entropy): both micro-batches on every
  rank, each rank half of every split GEMM and half of the vocabulary,
  --threads T/2 each;
* tp 2 + sequence parallelism (dsc --tp 2 --sequence-parallel, Korthikanti
  et al. 2022): as tp 2, with the layer norms, residual adds and dropouts
  on each rank's half of the tokens, all-gathers and reduce-scatters in
  place of the activation all-reduces;
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
allocates after the steps to assemble the whole trained tensors for
weights.safetensors (on the root rank); the parameter elements per rank
(the manifest's `parameters per rank` for tp, `parameters` otherwise)
against the formula

    P/tp + R (1 - 1/tp),  i.e. (P - R)/tp + R,

where R are the parameters every tp rank holds whole: the position
embedding (wpe), every layer norm's weight and bias, and the biases of the
row-parallel GEMMs (attention and MLP output projections, added once after
the reduction). The token embedding (wte, = the tied LM head) is split over
the vocabulary. R is counted from the ONNX model's initializers by name;
the manifest's split/whole figures are dsc's own.

The communication per step dsrt counted, per collective, in the ZeRO
paper's units (an all-reduce of n elements counts 2n, an all-gather or
reduce-scatter of a whole tensor of n elements counts n), against the
formulas, with L layers, m micro-batches per step, b x s tokens of width h
per micro-batch:

* tp (Megatron, vocabulary parallel): per layer and micro-batch 2
  all-reduces of b*s*h forward (after the attention and MLP row-parallel
  GEMMs) and 2 backward (the input gradients of the column-parallel GEMMs);
  per micro-batch 4 more: the vocabulary-parallel embedding's sum (b*s*h)
  forward, the LM head's input gradient (b*s*h) backward, the
  cross-entropy's row maxima (b*s) and sums (2*b*s) forward; one
  1-element all-reduce of the gradient norm's square sum:
  m (4L + 4) + 1 calls, 2 (m ((4L + 2) b s h + 3 b s) + 1) elements;
* tp + sequence parallel: per layer and micro-batch 2 all-gathers and 2
  reduce-scatters of b*s*h forward and 2 and 2 backward, plus the 2
  column GEMMs' inputs all-gathered again backward for their weight
  gradients (Megatron's backward); per micro-batch the embedding's parts
  reduce-scattered into the token-split region (all-gathered backward) and
  the final layer norm's output all-gathered for the LM head
  (reduce-scattered backward, gathered again for its weight gradient):
  m (6L + 3) all-gathers and m (4L + 2) reduce-scatters of b*s*h each; all-reduces: per micro-batch the
  position embedding's gradient (s*h, read whole by the token-split add)
  and the cross-entropy's row maxima (b*s) and sums (2*b*s), once per step
  the partial gradients of the layer norms and row-parallel biases (N
  elements, one call) and the norm: 3m + 2 calls,
  2 (m (s h + 3 b s) + N + 1) elements;
* dp ZeRO 0: an all-reduce of the P gradients (in the manifest's buckets),
  2P elements.

Activations per rank (one rank, tp 2, tp 2 + SP): the manifest's
`activations` line (arena minus model state; model state is the fp32
parameters and AdamW moments, so this includes the fp32 gradient
accumulators) and that minus 4 bytes per parameter per rank (assuming all
gradient accumulators are live at the planned peak), against what
sequence parallelism should save. The token-wise activations tp leaves
whole are, per micro-batch and at dropout 0 (no masks), (2L + 1) residual
stream tensors of b*s*h (the layer norms' inputs) and as many layer-norm
outputs (the column GEMMs' and the LM head's inputs); sequence parallelism
shrinks them to 1/tp. Counted in fp32, 4 b s h bytes each:

    Korthikanti's set: (4L + 2) * 4 b s h * (1 - 1/tp)   (keeps the 1/tp
        layer-norm output and all-gathers it again in backward);
    the layer-norm inputs only: (2L + 1) * 4 b s h * (1 - 1/tp)   (the
        all-gathered outputs kept whole for the weight gradients; dsc's
        counted backward has no extra all-gather, so this is what it can
        save).

These are estimates of tensors, not of dsc's planned peak: its planner
(fp32, its own fusions, liveness-based reuse of one arena) is not the
paper's fp16 per-layer accounting, so the measured difference is reported
beside them, not fitted to them.

Each configuration runs --warmup untimed + --steps timed steps in its own
process; the configurations alternate --rounds times and each keeps its
best (lowest) median step. Peak RSS is the largest over the rounds. The
losses of dp 2, tp 2 and tp 2 + SP are compared with one rank's (same
global batch, dropout 0: they should agree to float32 rounding).
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
                    median_step, metrics, pytorch_blas, report, run, run_measured, token_file)

CONFIGS = ["one", "dp2", "tp2", "sp2"]
TP = ["tp2", "sp2"]
LABEL = {"one": "dsc, 1 rank (GA 2)", "dp2": "dsc, dp 2 (ZeRO 0)", "tp2": "dsc, tp 2 (GA 2)",
         "sp2": "dsc, tp 2 + SP (GA 2)", "torch": "PyTorch eager, 1 process"}
# The manifest's names of the collectives -> dsrt's.
KIND = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter"}


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
        # "N all-reduces of E elements[, N all-gathers of E, N reduce-scatters
        # of E] (Z in the ZeRO paper's units, ...)": per kind in ZeRO units
        # (the all-reduces' E counts twice there), as dsrt counts.
        c = re.search(r"tp communication per step: (.*?) \((\d+) in the ZeRO", m)
        r["tp_comm_kinds"] = {
            KIND[k]: (int(n), int(e) * (2 if k == "all-reduce" else 1))
            for n, k, e in re.findall(r"(\d+) (all-reduce|all-gather|reduce-scatter)s? of (\d+)",
                                      c.group(1))}
        r["tp_comm"] = (sum(n for n, _ in r["tp_comm_kinds"].values()), int(c.group(2)))
        sp = re.search(r"^\s+sequence parallel: (.*)$", m, re.M)
        r["sp_line"] = sp.group(1) if sp else None
    dp = re.search(r"^\s+total: (\d+) calls?, (\d+) elements", m, re.M)
    if dp:
        r["dp_comm"] = (int(dp.group(1)), int(dp.group(2)))
    return r


WPE, LN, RBIAS = ("position embedding (wpe)", "layer norms",
                  "row-parallel biases (attn.c_proj, mlp.c_proj)")


def replicated(model_path):
    """(P, {kind: elements}, wte elements) of the ONNX model's trainable
    initializers (the .weight and .bias tensors; attention masks are
    buffers): the kinds a tp rank holds whole, by name, and the token
    embedding (= the tied LM head), which vocabulary parallelism splits."""
    import onnx
    from math import prod
    m = onnx.load(model_path, load_external_data=False)
    total, wte, kinds = 0, 0, {WPE: 0, LN: 0, RBIAS: 0}
    for t in m.graph.initializer:
        if not t.name.endswith((".weight", ".bias")):
            continue
        n = prod(t.dims)
        total += n
        if t.name.endswith("wte.weight"):
            wte += n
        elif t.name.endswith("wpe.weight"):
            kinds[WPE] += n
        elif re.search(r"\.ln_(1|2|f)\.", t.name):
            kinds[LN] += n
        elif t.name.endswith("c_proj.bias"):
            kinds[RBIAS] += n
    return total, kinds, wte


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
    blas = pytorch_blas()  # train_pytorch.py's runs get it
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
    P, kinds, wte = replicated(model)
    R = sum(kinds.values())

    # The plans: (config, ga, dp, dsc flags, threads per rank, ranks).
    setup = {"one": (2, 1, [], a.threads, 1),
             "dp2": (1, 2, ["--dp", "2"], a.threads // 2, 2),
             "tp2": (2, 1, ["--tp", "2"], a.threads // 2, 2),
             "sp2": (2, 1, ["--tp", "2", "--sequence-parallel"], a.threads // 2, 2)}
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
              "tp2": man["tp2"].get("tp_params", man["tp2"]["params"]),
              "sp2": man["sp2"].get("tp_params", man["sp2"]["params"])}
    formula = {"one": P, "dp2": P, "tp2": (P - R) // 2 + R, "sp2": (P - R) // 2 + R}

    # Communication formulas, per collective (ZeRO units).
    L, m, b, s, h = a.layers, 2, a.batch, a.seq, a.d_model
    bsh, bs, N = b * s * h, b * s, kinds[LN] + kinds[RBIAS]
    comm_formula = {
        "one": {},
        "dp2": {"all_reduce": (man["dp2"]["dp_comm"][0], 2 * P)},
        "tp2": {"all_reduce": (m * (4 * L + 4) + 1, 2 * (m * ((4 * L + 2) * bsh + 3 * bs) + 1))},
        "sp2": {"all_reduce": (3 * m + 2, 2 * (m * (s * h + 3 * bs) + N + 1)),
                "reduce_scatter": (m * (4 * L + 2), m * (4 * L + 2) * bsh),
                "all_gather": (m * (6 * L + 3), m * (6 * L + 3) * bsh)}}

    def kinds_text(d):
        if not d:
            return "none"
        return ", ".join(f"{k} {n} call{'s' if n != 1 else ''} {e:,}"
                         for k, (n, e) in sorted(d.items()))

    def comm_text(c):
        return kinds_text(res[c].get("comm", {}))

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
                 ("tp2", "(P - R)/2 + R"), ("sp2", "(P - R)/2 + R")):
        plines.append(f"| {LABEL[c]} | {params[c]:,} | {f} | {formula[c]:,} | "
                      f"{'yes' if params[c] == formula[c] else 'NO'} |")
    rlines = ["| replicated on every tp rank (R) | elements |", "|---|---|"]
    rlines += [f"| {k} | {v:,} |" for k, v in kinds.items()]
    rlines.append(f"| R, total | {R:,} ({R / P:.2%} of P = {P:,}) |")
    rlines.append(f"| (split over the vocabulary, not in R: wte = tied LM head) | {wte:,} |")

    clines = ["| run | dsrt measured: calls / elements | formula | formula: calls / elements "
              "| equal | dsc planned (manifest) |",
              "|---|---|---|---|---|---|"]
    ftext = {"one": "none",
             "dp2": f"all-reduce of the P gradients, 2P, in buckets of <= {a.bucket:,} "
                    "elements (calls: the manifest's buckets)",
             "tp2": "all-reduce: m (4L + 4) + 1 calls, 2 (m ((4L + 2) b s h + 3 b s) + 1)",
             "sp2": "all-reduce: 3m + 2 calls, 2 (m (s h + 3 b s) + N + 1); all-gather: "
                    "m (6L + 3) calls, m (6L + 3) b s h; reduce-scatter: m (4L + 2) calls, "
                    "m (4L + 2) b s h"}
    for c in CONFIGS:
        got = res[c].get("comm", {})
        planned = man[c].get("tp_comm_kinds") or (
            {"all_reduce": man[c]["dp_comm"]} if "dp_comm" in man[c] else {})
        clines.append(f"| {LABEL[c]} | {kinds_text(got)} | {ftext[c]} | "
                      f"{kinds_text(comm_formula[c])} | "
                      f"{'yes' if got == comm_formula[c] else 'NO'} | "
                      f"{kinds_text(planned)} |")
    cvals = (f"L={L}, m={m}, b*s*h={b}*{s}*{h}={bsh:,}, b*s={bs:,}, s*h={s * h:,}, N={N:,} "
             f"(the layer norms' {kinds[LN]:,} + the row-parallel biases' {kinds[RBIAS]:,})")
    ctot = "; ".join(f"{LABEL[c]} {comm_total(c)[1]:,}" for c in CONFIGS)

    def ratio(x, y):
        return f"{x / y:.2f}x"
    arena = {c: man[c]["arena"] for c in CONFIGS}
    state = {c: man[c]["model_state"] for c in CONFIGS}
    act = {c: man[c]["activations"] for c in CONFIGS}
    ratios = ["| ratio | tp 2 / dp 2 | tp 2 / 1 rank | dp 2 / 1 rank | tp 2 + SP / tp 2 "
              "| tp 2 + SP / 1 rank |", "|---|---|---|---|---|---|"]
    for name, d in (("step time", best), ("planned arena per rank", arena),
                    ("planned model state per rank", state),
                    ("planned activations per rank", act),
                    ("peak RSS per rank, training (dsrt, largest rank)", dsrt_rss),
                    ("peak RSS per rank, whole process (largest rank)", rss_max),
                    ("parameters per rank", params)):
        ratios.append(f"| {name} | {ratio(d['tp2'], d['dp2'])} | {ratio(d['tp2'], d['one'])} "
                      f"| {ratio(d['dp2'], d['one'])} | {ratio(d['sp2'], d['tp2'])} "
                      f"| {ratio(d['sp2'], d['one'])} |")

    # Activations per rank: planned, without the gradient accumulators, and
    # what sequence parallelism should save (see the docstring).
    tpn, tok_bytes = 2, 4 * bsh
    korth = (4 * L + 2) * tok_bytes * (1 - 1 / tpn)
    ln_in = (2 * L + 1) * tok_bytes * (1 - 1 / tpn)
    grads = {c: 4 * params[c] for c in CONFIGS}
    nograd = {c: act[c] - grads[c] for c in CONFIGS}
    alines = ["| run | planned activations per rank MiB (arena - model state) "
              "| of it fp32 gradients MiB (4 x parameters per rank) | activations without "
              "gradients MiB | vs 1 rank | vs tp 2 | peak RSS per rank MiB, training (dsrt) "
              "| peak RSS per rank MiB, whole process |", "|---|---|---|---|---|---|---|---|"]
    for c in ("one", "tp2", "sp2"):
        alines.append(f"| {LABEL[c]} | {act[c] / MiB:.2f} | {grads[c] / MiB:.2f} | "
                      f"{nograd[c] / MiB:.2f} | {nograd[c] / nograd['one']:.2f}x | "
                      f"{nograd[c] / nograd['tp2']:.2f}x | {dsrt_rss[c]} | "
                      + " / ".join(f"{rss[c][k]:.0f}" for k in sorted(rss[c])) + " |")
    saved = act["tp2"] - act["sp2"]
    elines = ["| what | MiB per rank | as a share of tp 2's activations without gradients |",
              "|---|---|---|",
              f"| planned: tp 2 - tp 2 + SP (activations line) | {saved / MiB:.2f} | "
              f"{saved / nograd['tp2']:.1%} |",
              f"| expected, Korthikanti's token-wise set: (4L + 2) x 4 b s h x (1 - 1/tp) | "
              f"{korth / MiB:.2f} | {korth / nograd['tp2']:.1%} |",
              f"| expected, the layer-norm inputs (residual stream) only: (2L + 1) x 4 b s h x "
              f"(1 - 1/tp) | {ln_in / MiB:.2f} | {ln_in / nograd['tp2']:.1%} |",
              f"| measured: peak RSS, training (dsrt), tp 2 - tp 2 + SP | "
              f"{dsrt_rss['tp2'] - dsrt_rss['sp2']} | - |"]

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
            + "".join(f"; whole: {w}" for w in man["tp2"].get("tp_whole_why", [])) + ".\n"
            + f"dsc's sequence-parallel plan: {man['sp2']['sp_line']}.\n\n"
            + "Communication per step (ZeRO units: an all-reduce of n elements counts 2n, an "
              "all-gather or reduce-scatter of a whole n-element tensor n), per collective, "
              f"with {cvals}:\n\n"
            + "\n".join(clines) + "\n\n"
            + f"Total elements per step: {ctot}.\n\n"
            + "Activations per rank (planned: the manifests; gradients: 4 bytes per parameter "
              "per rank, assumed live at the planned peak; peak RSS: measured, as above):\n\n"
            + "\n".join(alines) + "\n\n"
            + f"What sequence parallelism saves per rank, planned and measured, against the "
              f"token-wise activations of one micro-batch in fp32 (4 b s h = "
              f"{tok_bytes / MiB:.2f} MiB each; dropout 0, so no masks). Estimates of tensors, not of "
              "dsc's planner (fp32, its own fusions, liveness-based reuse of one arena), which "
              "is not Korthikanti et al.'s fp16 per-layer accounting:\n\n"
            + "\n".join(elines) + "\n\n"
            + f"Median step per round (ms): {per_round}.\n"
            + "Peak RSS per rank, training: dsrt's own figure (ru_maxrss when the steps are "
              "done, the largest rank's; before dsrt assembles the whole trained tensors on "
              "rank 0 to write weights.safetensors). Whole process: VmHWM of each rank sampled "
              "every 50 ms until it exits (rank 0 / rank 1; one rank: ru_maxrss from wait4), "
              "the final assembly included. Largest of the rounds. ru_maxrss from wait4 (the "
              "largest process of the tree: on 2 ranks the launcher, mpirun or a rank) "
            + ", ".join(f"{c} {max(res[c]['wait4']):.0f}" for c in configs) + " MiB.\n"
            + f"Losses against one rank's, largest relative difference over the steps: dp 2 "
              f"{losses_vs_one('dp2'):.1e}, tp 2 {losses_vs_one('tp2'):.1e}, tp 2 + SP "
              f"{losses_vs_one('sp2'):.1e}.\n"
            + f"Other processes kept {statistics.mean(others):.2f} cores busy on average "
              f"during the runs (at most {max(others):.2f}, /proc/stat minus the run's own "
              "CPU time).\n")
    report(blas + "\n\n" + text, a.markdown)
    print(f"(work folder: {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
