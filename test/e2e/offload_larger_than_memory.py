#!/usr/bin/python3
"""Larger than memory: a GPT whose training state (16 bytes per parameter
with Adam: fp32 parameters, gradients, exp_avg, exp_avg_sq) is at least
--ratio times the memory its process may use trains --steps steps with
ZeRO-Infinity's offload (parameters and optimizer state on NVMe). The limit
is a cgroup memory limit this script creates (cgroup v1's memory
controller, else v2's memory.max) around dsrt and removes after; where it
cannot create one (no permission, no memory controller), it prints why and
stops: "skipped".

    offload_larger_than_memory.py --dsc DSC --dsrt DSRT --model M.onnx --data TOKENS
        --work DIR [--steps 10] [--ratio 2.0] [--sub-group 4000000]

Compiles M with fp32 AdamW, ZeRO 3 on one rank and both offloads to NVMe
(DIR/nvme), sets the limit to state / ratio, and runs dsrt inside it. It
requires the run to finish every step with finite losses, the tier's folder
to be empty after, and the same plan without offload to be refused under
that limit before step 1 (it needs more than the limit; a clear error, not
an OOM kill). Prints:

    offload-ltm: trained S steps of N parameters: training state X MiB = R x
    the cgroup limit of L MiB; peak P MiB charged to the cgroup (page cache
    included; RSS Q MiB), NVMe tier T MiB, arena A MiB; T s per step
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time

MiB = 1 << 20


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"offload-ltm: FAIL: {' '.join(cmd)} exited {r.returncode}:\n"
                 f"{r.stderr[-3000:]}{r.stdout[-3000:]}")
    return r.stdout + r.stderr


class Cgroup:
    """A child memory cgroup of this process' own, with a limit."""

    def __init__(self, name, limit):
        self.path, self.v2 = None, False
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                num, ctrl, path = line.rstrip("\n").split(":", 2)
                own[ctrl] = path
        tried = []
        if "memory" in own:  # cgroup v1's memory controller
            base = "/sys/fs/cgroup/memory" + own["memory"]
            try:
                os.makedirs(os.path.join(base, name), exist_ok=True)
                self.path = os.path.join(base, name)
                self._write("memory.limit_in_bytes", limit)
                return
            except OSError as e:
                tried.append(f"cgroup v1 {base}: {e.strerror}")
                self.remove()
        if "" in own:  # cgroup v2
            base = "/sys/fs/cgroup" + own[""]
            try:
                with open(os.path.join(base, "cgroup.controllers")) as f:
                    if "memory" not in f.read().split():
                        raise OSError(0, "no memory controller")
                os.makedirs(os.path.join(base, name), exist_ok=True)
                self.path, self.v2 = os.path.join(base, name), True
                self._write("memory.max", limit)
                self._write("memory.swap.max", 0)
                return
            except OSError as e:
                tried.append(f"cgroup v2 {base}: {e.strerror}")
                self.remove()
        self.why = "; ".join(tried) or "no memory cgroup in /proc/self/cgroup"

    def _write(self, key, value):
        with open(os.path.join(self.path, key), "w") as f:
            f.write(str(value))

    def read(self, key):
        try:
            with open(os.path.join(self.path, key)) as f:
                return f.read()
        except OSError:
            return ""

    def peak(self):
        v = self.read("memory.peak" if self.v2 else "memory.max_usage_in_bytes").strip()
        return int(v) if v.isdigit() else -1

    def command(self, argv):
        """argv, started inside the cgroup."""
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh"] + argv

    def remove(self):
        if self.path and os.path.isdir(self.path):
            try:
                os.rmdir(self.path)
            except OSError:
                pass
        self.path = None


def manifest_number(text, pattern):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"offload-ltm: FAIL: the manifest has no match for {pattern!r}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsc", required=True)
    ap.add_argument("--dsrt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--ratio", type=float, default=2.0)
    ap.add_argument("--sub-group", type=int, default=4000000)
    ap.add_argument("--micro-batch", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    nvme = os.path.join(a.work, "nvme")
    os.makedirs(nvme, exist_ok=True)
    base = {"train_micro_batch_size_per_gpu": a.micro_batch, "gradient_clipping": 1.0,
            "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.01}},
            "zero_optimization": {"stage": 3, "sub_group_size": a.sub_group}}
    off = json.loads(json.dumps(base))
    off["zero_optimization"]["offload_optimizer"] = {"device": "nvme", "nvme_path": nvme}
    off["zero_optimization"]["offload_param"] = {"device": "nvme", "nvme_path": nvme}
    # DeepSpeed's default sub_group_size (1e9): one tile of all the state,
    # whose working copies the arena would hold at once.
    big = json.loads(json.dumps(off))
    big["zero_optimization"]["sub_group_size"] = 1000000000
    plans = {}
    for kind, cfg in (("plain", base), ("offload", off), ("offload-big", big)):
        path = os.path.join(a.work, f"{kind}.json")
        json.dump(cfg, open(path, "w"))
        plans[kind] = os.path.join(a.work, f"plan-{kind}")
        run([a.dsc, a.model, "--config", path, "-o", plans[kind]])
    manifest = open(os.path.join(plans["offload"], "manifest.txt")).read()
    params = manifest_number(manifest, r"parameters:\s+(\d+) in")
    arena = manifest_number(manifest, r"arena:\s+(\d+) bytes")
    tier = manifest_number(manifest, r"NVMe tier:\s+(\d+) bytes")
    state = 16 * params
    limit = int(state / a.ratio) // 4096 * 4096

    cg = Cgroup(f"dsc-ltm-{os.getpid()}", limit)
    if not cg.path:
        print(f"offload-ltm: skipped: no memory cgroup to limit dsrt with ({cg.why})")
        return
    try:
        # The plan without offload is refused under the limit, before step 1.
        r = subprocess.run(cg.command([a.dsrt, plans["plain"], "--data", a.data, "--steps",
                                       "1", "--out", os.path.join(a.work, "run-plain")]),
                           capture_output=True, text=True)
        refused = r.returncode != 0 and "more than its cgroup's memory limit" in r.stderr
        if not refused:
            sys.exit(f"offload-ltm: FAIL: without offload, dsrt under the {limit} byte limit "
                     f"exited {r.returncode} without the memory-limit error:\n{r.stderr[-2000:]}")
        # With one tile of everything the refusal names the setting that
        # fits, and a plan compiled with it fits the limit.
        r = subprocess.run(cg.command([a.dsrt, plans["offload-big"], "--data", a.data, "--steps",
                                       "1", "--out", os.path.join(a.work, "run-big")]),
                           capture_output=True, text=True)
        m = re.search(r"recompile with sub_group_size at most (\d+)", r.stderr)
        if r.returncode == 0 or not m:
            sys.exit(f"offload-ltm: FAIL: with sub_group_size 1e9, dsrt under the {limit} byte "
                     f"limit exited {r.returncode} without naming the sub_group_size that "
                     f"fits:\n{r.stderr[-2000:]}")
        fit = json.loads(json.dumps(off))
        fit["zero_optimization"]["sub_group_size"] = int(m.group(1))
        json.dump(fit, open(os.path.join(a.work, "fit.json"), "w"))
        run([a.dsc, a.model, "--config", os.path.join(a.work, "fit.json"), "-o",
             os.path.join(a.work, "plan-fit")])
        fit_arena = manifest_number(open(os.path.join(a.work, "plan-fit", "manifest.txt")).read(),
                                    r"arena:\s+(\d+) bytes")
        if fit_arena >= limit:
            sys.exit(f"offload-ltm: FAIL: sub_group_size {m.group(1)}, as the refusal says, "
                     f"plans an arena of {fit_arena} bytes, not under the limit of {limit}")
        print(f"offload-ltm: with sub_group_size 1e9 refused, naming sub_group_size at most "
              f"{m.group(1)} (arena {fit_arena / MiB:.0f} MiB under the limit)")
        if not cg.v2:  # v2's memory.peak counts from the cgroup's start
            cg._write("memory.max_usage_in_bytes", 0)
        out = os.path.join(a.work, "run-offload")
        t0 = time.time()
        r = subprocess.run(cg.command([a.dsrt, plans["offload"], "--data", a.data, "--steps",
                                       str(a.steps), "--out", out]),
                           capture_output=True, text=True)
        wall = time.time() - t0
        peak = cg.peak()
        if r.returncode:
            oom = "oom_kill " in cg.read("memory.events") or r.returncode in (-9, 137)
            sys.exit(f"offload-ltm: FAIL: dsrt exited {r.returncode}"
                     f"{' (killed by the cgroup OOM killer)' if oom else ''}:\n"
                     f"{r.stderr[-3000:]}{r.stdout[-2000:]}")
    finally:
        cg.remove()
    rows = list(csv.DictReader(open(os.path.join(out, "metrics.csv"))))
    if len(rows) != a.steps or not all(math.isfinite(float(x["loss"])) for x in rows):
        sys.exit(f"offload-ltm: FAIL: metrics.csv has {len(rows)} rows, expected {a.steps} "
                 "finite losses")
    if os.listdir(nvme):
        sys.exit(f"offload-ltm: FAIL: {nvme} is not empty after the run: {os.listdir(nvme)}")
    rss = re.search(r"peak RSS (\d+) MiB", r.stdout)
    step_time = [float(x["step_time_s"]) for x in rows if x.get("step_time_s")]
    per_step = (sum(step_time[1:]) / max(1, len(step_time) - 1)) if step_time else wall / a.steps
    print(f"offload-ltm: trained {a.steps} steps of {params} parameters: training state "
          f"{state / MiB:.0f} MiB = {state / limit:.2f} x the cgroup limit of {limit / MiB:.0f} MiB; "
          f"peak {peak / MiB:.0f} MiB charged to the cgroup (page cache included; RSS "
          f"{rss.group(1) if rss else '?'} MiB), NVMe tier {tier / MiB:.0f} MiB, arena "
          f"{arena / MiB:.0f} MiB; {per_step:.2f} s per step; loss {float(rows[0]['loss']):.3f} "
          f"-> {float(rows[-1]['loss']):.3f}")
    print("offload-ltm: without offload the same plan is refused under the limit before step 1")


if __name__ == "__main__":
    main()
