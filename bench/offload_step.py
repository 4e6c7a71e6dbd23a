#!/usr/bin/env python3
"""What ZeRO-Offload's host tier and ZeRO-Infinity's NVMe tier cost a step on
dsrt's CPU runtime, in one run (issue 24).

A GPT (models/gpt.py; default 8 layers, d 512, vocabulary 256, batch 8 x
128, AdamW) compiled six times: without offload, with offload_optimizer
{device: cpu}, with {device: nvme} (a folder under --nvme-dir, on the disk
to measure; sub_group_size --sub-group), the same with pipeline_read and
pipeline_write, and with the parameters on NVMe too (ZeRO 3,
offload_param), without and with pipelining, trained --steps steps from
the same weights on the same byte tokens. Reports the median step time of
each after --warmup steps, the ratios, the bytes a step moves to and from
its tier (the manifest's transfers), the NVMe step's I/O lower bound (those
bytes over the disk's sequential O_DIRECT read and write rates, measured
in the same run by dsrt_aio_bench on the same folder), the arena and tier
per rank and dsrt's peak RSS. All runs must end on the same bits.

    /usr/bin/python3 bench/offload_step.py [--layers 8 --d-model 512 --steps 12]
"""
import argparse
import filecmp
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, PY, REPO, dsrt_peak_rss, median_step, metrics, run, token_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sub-group", type=int, default=1000000)
    ap.add_argument("--work", default=None)
    ap.add_argument("--nvme-dir", default=None,
                    help="the NVMe tier's folder (default: a folder in --work)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="dsc-offload-")
    model = os.path.join(work, "gpt.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "--size", "tiny", "--vocab", "256",
         "--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", "8",
         "--seq", str(a.seq), "--batch", str(a.batch), "--dropout", "0", "-o", model])
    tokens = token_file(work)
    base = {"train_micro_batch_size_per_gpu": a.batch, "gradient_clipping": 1.0,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}
    off = json.loads(json.dumps(base))
    off["zero_optimization"] = {"offload_optimizer": {"device": "cpu"},
                                "sub_group_size": a.sub_group}
    nvme_dir = a.nvme_dir or os.path.join(work, "nvme")
    os.makedirs(nvme_dir, exist_ok=True)
    nv = json.loads(json.dumps(base))
    nv["zero_optimization"] = {"offload_optimizer": {"device": "nvme", "nvme_path": nvme_dir},
                               "sub_group_size": a.sub_group}
    # pipeline_read / pipeline_write: the I/O thread reads one fetch ahead
    # and writes behind.
    piped = json.loads(json.dumps(nv))
    piped["zero_optimization"]["offload_optimizer"].update(pipeline_read=True,
                                                          pipeline_write=True)
    # ZeRO-Infinity whole: the parameters on NVMe too (ZeRO 3 on one rank,
    # every parameter offloaded).
    params = json.loads(json.dumps(nv))
    params["zero_optimization"].update(
        stage=3, stage3_param_persistence_threshold=0,
        offload_param={"device": "nvme", "nvme_path": nvme_dir})
    params_piped = json.loads(json.dumps(params))
    params_piped["zero_optimization"]["offload_optimizer"].update(pipeline_read=True,
                                                                 pipeline_write=True)
    disk = run([os.path.join(BIN, "dsrt_aio_bench"), "--dir", nvme_dir, "--mib", "1024"])
    rates = re.search(r"write (\d+) MB/s .* read (\d+) MB/s", disk)
    write_bw, read_bw = float(rates.group(1)) * 1e6, float(rates.group(2)) * 1e6
    res = {}
    for name, cfg in (("in memory", base), ("offload cpu", off), ("offload nvme", nv),
                      ("offload nvme pipelined", piped), ("params+optimizer nvme", params),
                      ("params+optimizer nvme pipelined", params_piped)):
        d = os.path.join(work, name.replace(" ", "-"))
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "ds_config.json")
        json.dump(cfg, open(path, "w"))
        run([os.path.join(BIN, "dsc"), model, "--config", path, "-o", os.path.join(d, "plan")])
        out = os.path.join(d, "run")
        text = run([os.path.join(BIN, "dsrt"), os.path.join(d, "plan"), "--data", tokens,
                    "--steps", str(a.steps), "--out", out])
        manifest = open(os.path.join(d, "plan", "manifest.txt")).read()
        arena = int(re.search(r"^arena: +(\d+) bytes", manifest, re.M).group(1))
        tier = re.search(r"(?:host|NVMe) tier: +(\d+) bytes", manifest)
        moved = re.search(r"transfers: +per step ([0-9.]+) (KiB|MiB|GiB) .*?\(tier\.fetch\) "
                          r"and ([0-9.]+) (KiB|MiB|GiB)", manifest)
        unit = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
        res[name] = dict(step=median_step(metrics(out), a.warmup), arena=arena,
                         tier=int(tier.group(1)) if tier else 0, rss=dsrt_peak_rss(text), out=out,
                         read=float(moved.group(1)) * unit[moved.group(2)] if moved else 0.0,
                         written=float(moved.group(3)) * unit[moved.group(4)] if moved else 0.0)
    runs = list(res.values())
    same = all(filecmp.cmp(os.path.join(runs[0]["out"], "weights.safetensors"),
                           os.path.join(r["out"], "weights.safetensors"), shallow=False)
               for r in runs[1:])
    m = res["in memory"]
    lines = [f"GPT {a.layers} layers, d {a.d_model}, batch {a.batch} x {a.seq}, AdamW; "
             f"{a.steps} steps, median of the last {a.steps - a.warmup}; {os.cpu_count()} cores",
             f"disk of the NVMe tier ({nvme_dir}): {disk.splitlines()[-1]}",
             "", "| run | step (s) | vs in memory | moved per step | arena | tier | peak RSS |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in res.items():
        lines.append(f"| {name} | {r['step']:.4f} | {r['step'] / m['step']:.2f}x | "
                     f"{(r['read'] + r['written']) / 2**20:.1f} MiB | {r['arena'] / 2**20:.1f} MiB | "
                     f"{r['tier'] / 2**20:.1f} MiB | {r['rss']:.0f} MiB |")
    lines.append("")
    for name, r in res.items():
        if "nvme" not in name:
            continue
        bound = r["read"] / read_bw + r["written"] / write_bw
        lines.append(f"{name}: the tier's I/O alone takes at least {bound:.4f} s (the bytes over "
                     f"the disk's read and write rates); the step is {r['step'] / bound:.2f}x "
                     f"that bound and {r['step'] - m['step']:.4f} s longer than in memory "
                     f"(compute {m['step']:.4f} s: the step's floor is max(compute, I/O) = "
                     f"{max(m['step'], bound):.4f} s, {r['step'] / max(m['step'], bound):.2f}x)")
    lines.append(f"final weights bitwise equal across all runs: {'yes' if same else 'NO'}")
    print("\n".join(lines))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
