#!/usr/bin/python3
"""ZeRO-Offload moves state, not math: the same plan with and without
offload_optimizer {device: cpu} (or {device: nvme, nvme_path: DIR} with
small aio requests: --nvme DIR) trains to the same bits.

    offload_exact.py --dsc DSC --dsrt DSRT --model M.onnx --data TOKENS --out DIR \
        LAYOUT=CONFIG[:FLAGS] ...

For each layout: compiles CONFIG with dsc's FLAGS twice, as written and with
zero_optimization.offload_optimizer {"device": "cpu"} (with --params also
offload_param, ZeRO-3's parameters) and sub_group_size --sub-group (several
tiles), runs both --steps steps on the same data, and
requires metrics.csv's loss, lr and grad_norm columns and weights.safetensors
to be equal byte for byte. Also requires the offloaded plan to hold its
optimizer state in the host tier (the manifest's "host tier:" line). Prints
one line per layout:

    offload-exact: LAYOUT: N steps bitwise equal; host tier B bytes, T tiles
    (or NVMe tier)

--plain-cache DIR keeps each plain (not offloaded) run there, under a key of
its plan.pb's bytes, data and steps, and copies it into the layout's folder
when the same plan comes again: a test that checks one layout against
several tiers trains the reference once.
"""
import argparse
import csv
import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"offload-exact: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}{r.stdout}")
    return r.stdout


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in csv.DictReader(f)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsc", required=True)
    ap.add_argument("--dsrt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--sub-group", type=int, default=5000)
    ap.add_argument("--nvme", default=None, metavar="DIR",
                    help="offload to NVMe: the tier's folder (aio: 64 KiB requests, 4 in "
                         "flight, so that a tensor takes several)")
    ap.add_argument("--params", default=None,
                    choices=["same", "cpu", "nvme"],
                    help="also offload the parameters (offload_param: the optimizer's device, "
                         "or the one given; stage3_param_persistence_threshold 0, so that every "
                         "one is)")
    ap.add_argument("--param-nvme", default=None, metavar="DIR",
                    help="with --params nvme: the parameters' own nvme_path (a second "
                         "tier file per rank; DeepSpeed's two drives)")
    ap.add_argument("--pipeline", action="store_true",
                    help="with --nvme: pipeline_read and pipeline_write (read-ahead, "
                         "write-behind on an I/O thread)")
    ap.add_argument("--plain-cache", default=None, metavar="DIR",
                    help="reuse the plain runs kept here by an earlier call of this test")
    ap.add_argument("layouts", nargs="+")
    a = ap.parse_args()
    failed = False
    for spec in a.layouts:
        name, rest = spec.split("=", 1)
        config, _, flags = rest.partition(":")
        cfg = json.load(open(config))
        off = json.loads(json.dumps(cfg))
        zero = off.setdefault("zero_optimization", {})
        zero["offload_optimizer"] = ({"device": "nvme", "nvme_path": a.nvme} if a.nvme
                                     else {"device": "cpu"})
        zero["sub_group_size"] = a.sub_group
        if a.params:
            zero["offload_param"] = (dict(zero["offload_optimizer"]) if a.params == "same" else
                                     {"device": a.params,
                                      "nvme_path": a.param_nvme or a.nvme or ""})
            if a.params == "nvme" and not (a.nvme or a.param_nvme):
                sys.exit("offload-exact: --params nvme needs --nvme DIR or --param-nvme DIR")
            zero["stage3_param_persistence_threshold"] = 0
        if a.nvme:
            off["aio"] = {"block_size": 65536, "queue_depth": 4}
        if a.pipeline:
            zero["offload_optimizer"].update(pipeline_read=True, pipeline_write=True)
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        json.dump(off, open(os.path.join(d, "offload.json"), "w"))
        runs = {}
        for kind, path in (("plain", config), ("offload", os.path.join(d, "offload.json"))):
            plan = os.path.join(d, f"plan-{kind}")
            run([a.dsc, a.model, "--config", path, "-o", plan] + flags.split())
            runs[kind] = os.path.join(d, f"run-{kind}")
            kept = None
            if kind == "plain" and a.plain_cache:
                key = hashlib.sha256(open(os.path.join(plan, "plan.pb"), "rb").read() +
                                     json.dumps([os.path.abspath(a.data), a.steps]).encode())
                kept = os.path.join(a.plain_cache, key.hexdigest()[:16])
                if os.path.isdir(kept):
                    shutil.copytree(kept, runs[kind])
                    continue
            run([a.dsrt, plan, "--data", a.data, "--steps", str(a.steps), "--out", runs[kind]])
            if kept:
                shutil.copytree(runs[kind], kept)
        manifest = open(os.path.join(d, "plan-offload", "manifest.txt")).read()
        tier = re.search(r"((?:host|NVMe) tier):\s+(\d+) bytes", manifest)
        if a.params and not re.search(r"(host|NVMe) tier: .* of parameters", manifest):
            print(f"offload-exact: {name}: FAIL: the offloaded plan has no parameters in a tier")
            failed = True
        tiles = re.search(r"tiles:\s+(\d+)", manifest)
        ok = True
        if not tier or not tiles or int(tier.group(2)) == 0:
            print(f"offload-exact: {name}: FAIL: the offloaded plan has no host tier")
            ok = False
        if metrics(runs["plain"]) != metrics(runs["offload"]):
            print(f"offload-exact: {name}: FAIL: loss, lr or grad_norm differ")
            ok = False
        if not filecmp.cmp(os.path.join(runs["plain"], "weights.safetensors"),
                           os.path.join(runs["offload"], "weights.safetensors"), shallow=False):
            print(f"offload-exact: {name}: FAIL: the weights differ")
            ok = False
        if ok:
            print(f"offload-exact: {name}: {a.steps} steps bitwise equal; {tier.group(1)} "
                  f"{tier.group(2)} bytes, {tiles.group(1)} tiles")
        failed |= not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
