"""Every real ds_config of the corpus against a small GPT: it trains, or it is
refused for a feature dsc does not have yet, named in EXPECTED below.

The corpus (../shared/ds_configs, third-party files listed in its
SOURCES.md) is read where it lies, never copied. Each file is compiled with
dsc against a tiny GPT exported with a dynamic batch (--batch-size 2 where
the config leaves the micro-batch to the model: "auto" or absent); what
compiles trains --steps steps on synthetic batches, on up to --max-ranks
local ranks (a plan for more is only compiled). A refusal must contain the
text listed for its file, and a file listed as refused must not train: the
list can only shrink as features land.

    ds_config_corpus.py --dsc DSC --dsrt DSRT --model gpt.onnx --corpus DIR --work DIR
    ... --markdown        the table of docs/ds-config-corpus.md, on stdout
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys

# file (without .json) -> (feature dsc lacks, text the refusal contains)
STRICT = ("a key DeepSpeed edaa72212 refuses too (its pydantic section forbids it)",
          "unknown key")
PRESCALE = ("gradient pre-division (prescale_gradients, gradient_predivide_factor)",
            "divide")
EXPECTED = {
    "bigscience-megatron-deepspeed__tests-ds_config_cl": (
        "curriculum learning", "'curriculum_learning.enabled' is true"),
    # zero_optimization.sdma_allgather{,_max_numel}: read only on PR #7999's
    # branch (5644ae32b), where this file comes from; DeepSpeed merged it as
    # the DS_SDMA_ALLGATHER environment variable (66af8f03a), so master
    # (edaa72212) and every release refuse the keys.
    "deepspeed__sdma_allgather-ds_config_zero3_sdma": STRICT,
    "dsexamples__autosp_config": (
        "DeepSpeed-Ulysses sequence parallelism", "'sequence_parallel_size' is number 2"),
    "dsexamples__deepspeed_bsz4k_progressive_layer_drop_config_seq128": PRESCALE,
    "dsexamples__deepspeed_bsz64k_lamb_config_seq128": (
        "sparse attention", "sparse_attention"),
    "dsexamples__ds_autoep_zero1_qwen3_5_moe": (
        "expert parallelism", "'expert_parallel.enabled' is true"),
    "dsexamples__ds_config_W8A8_Qgroup64_fp16": (
        "DeepSpeed Compression", "'compression_training' is not supported"),
    "dsexamples__ds_config_gpt_medium_random_ltd": (
        "data efficiency (random-LTD)", "'data_efficiency.enabled' is true"),
    "dsexamples__ds_zero_stage_infinity_config": (
        "a typo DeepSpeed edaa72212 refuses too (stage3_param_persitance_threshold)",
        "did you mean 'stage3_param_persistence_threshold'"),
    "dsexamples__training-cifar-ds_config": STRICT,
    "dsexamples__zf_config": ("ZenFlow", "dsc has no ZenFlow"),
    "habana__deepspeed_config_bert_5b_lans": STRICT,
    "llamafactory__ds_z3_alst_config": STRICT,
    "llamafactory__ds_z3_e9_quant_grads": (
        "ZeRO++ quantized communication", "'zero_optimization.zero_quantized_gradients'"),
    "megatron-deepspeed-ms__ds_config_gpt3-0.125B-tokendropping-graduallyIncrease-lr-3.0e-4":
        PRESCALE,
    "megatron-deepspeed-ms__ds_zero2_config_bf16": STRICT,
    "megatron-deepspeed-ms__examples-ds_config": (
        "offload_param below ZeRO stage 3 (DeepSpeed ignores it there)", "it needs ZeRO stage 3"),
    "megatron-deepspeed__universal_checkpointing-ds_config": STRICT,
    "trlx__summarize_rlhf-sft-ds_config_gptj": STRICT,
    "invalid/dsexamples__ds_zero_stage_2_config_curriculum_fixed_linear": (
        "a template placeholder (CONFIG_CL_MIN), to be filled in before any run",
        "unquoted word 'CONFIG_CL_MIN': a template placeholder"),
}

DP = re.compile(r"^data parallel: +(\d+) ranks", re.M)
PP = re.compile(r"^pipeline: +(\d+) stages", re.M)
TP = re.compile(r"^tensor parallel: +tp (\d+)", re.M)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def run_config(args, path, flags):
    base = [args.dsc, args.model, "--config", path] + flags
    p = subprocess.run(base, capture_output=True, text=True)
    if p.returncode != 0 and "is dynamic; dsc compiles static shapes" in p.stdout + p.stderr:
        # The micro-batch is "auto" or absent: the Trainer's
        # per_device_train_batch_size, here --batch-size.
        p = subprocess.run(base + ["--batch-size", "2"], capture_output=True, text=True)
    return p.returncode, p.stdout if "--print-config" in flags else p.stdout + p.stderr


def compile_config(args, path, plan):
    return run_config(args, path, ["-o", plan])


def plan_ranks(plan):
    with open(os.path.join(plan, "manifest.txt")) as f:
        text = f.read()
    ranks = 1
    for pattern in (DP, PP, TP):
        m = pattern.search(text)
        ranks *= int(m.group(1)) if m else 1
    return ranks


MONITORS = ("tensorboard", "csv_monitor")


def monitors_here(args, path, work):
    """A run-time config whose enabled monitors write under `work`: the
    corpus's output_path values are their authors' folders (some absolute),
    which a test must not write to. dsrt --config may change the monitors of
    a compiled plan; the copy is dsc --print-config's effective config (its
    "auto" values filled in as the compile filled them) with only the
    monitors' output_path changed. None when the config enables no monitor."""
    rc, text = run_config(args, path, ["--print-config"])
    if rc != 0:
        return None
    cfg = json.loads(text)
    moved = False
    for key in MONITORS:
        sec = cfg.get(key)
        if isinstance(sec, dict) and sec.get("enabled"):
            sec["output_path"] = os.path.join(work, key)
            moved = True
    if not moved:
        return None
    copy = os.path.join(work, "config.json")
    json.dump(cfg, open(copy, "w"))
    return copy


def notes_of(text, path):
    """The notes a compile printed about config `path`, without the prefix."""
    prefix = "dsc: note: %s: " % path
    return {l[len(prefix):] for l in text.splitlines() if l.startswith(prefix)}


def round_trip(args, path, plan, work, compiled_text):
    """dsc --print-config's output, fed back to dsc, is the config that ran:
    it reads back to the same effective config, draws no note the original
    did not (none for a key its user never set), and compiles to the same
    plan.pb bytes. Returns what differs, or None."""
    rc, printed = run_config(args, path, ["--print-config"])
    if rc != 0:
        return "--print-config failed: " + printed.strip()
    copy = os.path.join(work, "printed.json")
    with open(copy, "w") as f:
        f.write(printed)
    rc, again = run_config(args, copy, ["--print-config"])
    if rc != 0:
        return "the printed config is refused: " + again.strip()
    if again != printed:
        return "the printed config prints back differently"
    p = subprocess.run([args.dsc, args.model, "--config", copy, "-o",
                        os.path.join(work, "plan")], capture_output=True, text=True)
    if p.returncode != 0 and "is dynamic; dsc compiles static shapes" in p.stderr:
        p = subprocess.run([args.dsc, args.model, "--config", copy, "--batch-size", "2", "-o",
                            os.path.join(work, "plan")], capture_output=True, text=True)
    if p.returncode != 0:
        return "the printed config does not compile: " + p.stderr.strip()
    extra = notes_of(p.stderr, copy) - notes_of(compiled_text, path)
    if extra:
        return "the printed config draws notes the original does not: " + "; ".join(sorted(extra))
    with open(os.path.join(plan, "plan.pb"), "rb") as a, \
            open(os.path.join(work, "plan", "plan.pb"), "rb") as b:
        if a.read() != b.read():
            return "the printed config compiles to other plan.pb bytes"
    return None


def train(args, plan, out, config=None):
    rc, text = run([args.dsrt, plan, "--steps", str(args.steps), "--out", out] +
                   (["--config", config] if config else []))
    if rc != 0:
        return False, text
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    losses = [float(r["loss"]) for r in rows]
    if len(losses) != args.steps or not all(math.isfinite(l) for l in losses):
        return False, "metrics.csv: %d steps, losses %s" % (len(losses), losses)
    return True, "loss %.4f -> %.4f" % (losses[0], losses[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsc", required=True)
    ap.add_argument("--dsrt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--max-ranks", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    names = sorted(f[:-5] for f in os.listdir(args.corpus) if f.endswith(".json"))
    inv = os.path.join(args.corpus, "invalid")
    if os.path.isdir(inv):
        names += sorted("invalid/" + f[:-5] for f in os.listdir(inv) if f.endswith(".json"))
    failures, rows = [], []
    trained = compiled = round_trips = compiling = 0
    refused = {}
    for i, name in enumerate(names):
        path = os.path.join(args.corpus, name + ".json")
        plan = os.path.join(args.work, "plan%d" % i)
        rc, out = compile_config(args, path, plan)
        expected = EXPECTED.get(name)
        if rc != 0:
            first = out.strip().splitlines()[0] if out.strip() else "(no output)"
            if expected is None:
                failures.append("%s: refused, but it should train: %s" % (name, out.strip()))
            elif expected[1] not in out:
                failures.append("%s: refused for another reason than %s (%r): %s" %
                                (name, expected[0], expected[1], out.strip()))
            refused.setdefault(expected[0] if expected else "(unexpected)", []).append(name)
            rows.append((name, "refused: " + (expected[0] if expected else first)))
            continue
        if expected is not None:
            failures.append("%s: compiles, but it is listed as refused for %s: remove it from "
                            "EXPECTED" % (name, expected[0]))
        rt = os.path.join(args.work, "rt%d" % i)
        os.makedirs(rt, exist_ok=True)
        compiling += 1
        differs = round_trip(args, path, plan, rt, out)
        if differs:
            failures.append("%s: --print-config does not round-trip: %s" % (name, differs))
        else:
            round_trips += 1
        ranks = plan_ranks(plan)
        if ranks > args.max_ranks:
            compiled += 1
            rows.append((name, "compiles (%d ranks: not started here)" % ranks))
            continue
        here = os.path.join(args.work, "run%d" % i)
        os.makedirs(here + ".monitors", exist_ok=True)
        ok, what = train(args, plan, here, monitors_here(args, path, here + ".monitors"))
        if not ok:
            failures.append("%s: compiled but did not train: %s" % (name, what))
            rows.append((name, "compiled, training FAILED"))
            continue
        trained += 1
        rows.append((name, "trains %d steps on %d rank%s (%s)" %
                     (args.steps, ranks, "" if ranks == 1 else "s", what)))

    total_refused = sum(len(v) for v in refused.values())
    if args.markdown:
        print("| file | result |\n|---|---|")
        for name, result in rows:
            print("| `%s` | %s |" % (name, result))
        print("\n| refused for | files |\n|---|---|")
        for feature, files in sorted(refused.items(), key=lambda kv: -len(kv[1])):
            print("| %s | %d |" % (feature, len(files)))
    for f in failures:
        print("ds_config_corpus: FAIL: " + f)
    print("ds_config_corpus: %d files: %d train, %d compile (more ranks than a test starts), "
          "%d refused (%s)" % (len(names), trained, compiled, total_refused,
                               ", ".join("%s: %d" % (k, len(v)) for k, v in
                                         sorted(refused.items(), key=lambda kv: -len(kv[1])))))
    print("ds_config_corpus: --print-config round-trips for %d of the %d that compile "
          "(the same effective config, no note, the same plan.pb bytes)"
          % (round_trips, compiling))
    print("ds_config_corpus: %s" % ("FAIL" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
