#!/usr/bin/python3
"""Checkpoint save and load for GPT-2 small, in one run: against the disk,
and what saving costs training (issue 14).

    flock /tmp/dsc-build.lock /usr/bin/python3 bench/checkpoint.py [--markdown FILE]

The model: models/gpt.py --size gpt2-small (12 layers, d 768, 12 heads, the
50257-token tied head, dropout 0.1) at --seq 64 and --batch 1, so that a
step is short while the state is GPT-2 small's: 123.7M parameters (GPT-2's
124.4M less 960 of its 1024 position rows), with AdamW's exp_avg and
exp_avg_sq 1416 MiB of float32. Data: the project's text as byte tokens.
Plans: one rank (--threads 2) and dp 2 with ZeRO 3 (--threads 1 each), where
every rank owns and writes half of every tensor.

In each round:

1. Memory: python writes anonymous memory of the checkpoint's size twice
   (the first time pays the page faults, as the staging buffer's first
   snapshot does).
   The disk, measured like a checkpoint, before and after each rank
   count's runs: python writes a file of the checkpoint's size (for two
   ranks: two files of half, from two threads at once) into the work
   folder's file system, then fsyncs it; the write() time and the fsync
   time are reported apart. The file is then evicted from the page cache
   (posix_fadvise DONTNEED, checked with fincore where it exists) and read
   back (cold), then read again (cached).
2. For 1 and 2 ranks, dsrt runs (each in its own process, the step lines
   timed as they arrive; steps_per_print 1):
   * no saving, 2 x --interval steps: the reference run;
   * --save-mode sync and async with a save every step (--every-steps
     steps; --keep 1);
   * sync and async with a save every --interval steps (2 x --interval
     steps, --keep 2: the saves at --interval and at the end);
   * --resume from the async run's checkpoint at step --interval, after
     evicting its files from the page cache (cold), to the end: its losses
     and final weights must be bitwise the reference run's;
   * --resume from the same checkpoint again (now cached), one step: its
     loss must be the reference's.
   Save time and MiB/s are dsrt's `dsrt: checkpoint` lines (from the save's
   start to `latest` naming it), "training waited" their async figure, load
   time the `restored in` of `dsrt: resuming` (the slowest rank's
   restore()). An iteration is the wall time between two step lines: the
   step, the save (sync), the snapshot copy and any wait for the save
   before (async). "compute step" is dsrt's metrics.csv step_time_s (the
   step alone: a slower one shows the writer thread competing for the
   cores). The loop time is dsrt's `done in` (the steps and every save,
   the last one included). The cost of the save at step K = --interval is
   what iterations K .. 2K-1 took beyond K times the median of iterations
   K+1 .. 2K-1 (most of which the writer leaves alone): a save mid-run,
   with the steps its writer slowed, before the last save.
   A save's `/ disk` compares its MiB/s with the best write + fsync of the
   same number of writers. Peak RSS is dsrt's (the largest over the ranks;
   async adds a staging buffer of the rank's state).
   The async and sync checkpoints of the same step are compared bytewise.

The machine's load: the cores other processes kept busy during each run
(/proc/stat less the run's own CPU time). Every timed command must run
under /tmp/dsc-build.lock (run the whole script under flock, as above).
Checkpoints, trained weights, the model and the plans are deleted once
used; the work folder keeps the logs, each run's metrics.csv and the
measurements (results.json; --report rebuilds the tables from it). Give
--work to choose it (the default is a new temp dir); it must be on the file
system to test, with about 12 GiB free.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (BIN, PY, REPO, busy_cpu_seconds, report, run, sha256,  # noqa: E402
                    token_file)

MiB = 2.0 ** 20
DSRT = os.path.join(BIN, "dsrt")
CKPT_RE = re.compile(r"dsrt: checkpoint (\S+): ([\d.]+) MiB in ([\d.]+)s \((\d+) MiB/s\)"
                     r"(?:, training waited ([\d.]+)s)?")
STEP_RE = re.compile(r"^step\s+(\d+)/\d+ \| loss")


# --------------------------------------------------------------------------
# Running a process: its lines as they arrive, its peak RSS, the machine's load

def run_timed(cmd, log):
    """Runs cmd, stdout+stderr line by line to `log` with their arrival times.
    Returns ([(seconds, line)], ru_maxrss MiB of the process tree, the mean
    number of cores other processes kept busy meanwhile); exits if it fails."""
    busy0, t0 = busy_cpu_seconds(), time.monotonic()
    lines = []
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             bufsize=1)
        for line in p.stdout:
            t = time.monotonic() - t0
            lines.append((t, line.rstrip("\n")))
            f.write(f"{t:9.3f} {line}")
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    other = max(0.0, (busy_cpu_seconds() - busy0 - ru.ru_utime - ru.ru_stime) / max(wall, 1e-9))
    if os.waitstatus_to_exitcode(status):
        tail = "\n".join(l for _, l in lines[-40:])
        sys.exit(f"bench: {' '.join(cmd)} failed ({os.waitstatus_to_exitcode(status)}):\n{tail}")
    return lines, ru.ru_maxrss / 1024.0, other


def parse_run(lines, outdir):
    """What a dsrt run printed and wrote."""
    r = {"saves": [], "iters": {}, "restore": None}
    prev = None
    for t, l in lines:
        if re.match(r"^dsrt: \S+, \d+ steps x", l):
            prev = t  # printed just before the first step
        m = STEP_RE.match(l)
        if m:
            s = int(m.group(1))
            if prev is not None:
                r["iters"][s] = t - prev
            prev = t
        m = CKPT_RE.search(l)
        if m:
            r["saves"].append({"path": m.group(1), "step": int(m.group(1).rsplit("-", 1)[1]),
                               "mib": float(m.group(2)), "s": float(m.group(3)),
                               "waited": float(m.group(5)) if m.group(5) else None})
        m = re.search(r"restored in ([\d.]+)s", l)
        if m:
            r["restore"] = float(m.group(1))
        m = re.search(r"dsrt: done in ([\d.]+)s, peak RSS (\d+) MiB", l)
        if m:
            r["loop"], r["rss"] = float(m.group(1)), int(m.group(2))
    with open(os.path.join(outdir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    r["losses"] = {int(x["step"]): x["loss"] for x in rows}
    r["compute"] = {int(x["step"]): float(x["step_time_s"]) for x in rows}
    return r


# --------------------------------------------------------------------------
# The page cache and the disk

def evict(paths):
    """Drops the files from the page cache (they must be written back: dsrt
    and disk_test fsync). Returns their resident bytes after, by fincore,
    or None where fincore is missing."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if not shutil.which("fincore"):
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES"] + paths,
                         capture_output=True, text=True)
    if out.returncode:
        return None
    return sum(int(x) for x in out.stdout.split())


def read_all(paths):
    """Reads the files whole (one thread each), returns the seconds."""
    def one(p):
        with open(p, "rb", buffering=0) as f:
            while f.read(1 << 24):
                pass
    t = time.monotonic()
    threads = [threading.Thread(target=one, args=(p,)) for p in paths]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.monotonic() - t


def disk_test(folder, total_bytes, writers):
    """Writes `writers` files of total_bytes / writers at once (a thread
    each), fsyncs them, evicts them, reads them cold and cached; MiB/s."""
    chunk = os.urandom(16 << 20)
    size = total_bytes // writers
    paths = [os.path.join(folder, f"disk-test-{i}.bin") for i in range(writers)]
    times = {}

    def write(i, p):
        t = time.monotonic()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        left = size
        while left:
            left -= os.write(fd, memoryview(chunk)[:min(len(chunk), left)])
        t1 = time.monotonic()
        os.fsync(fd)
        os.close(fd)
        times[i] = (t1 - t, time.monotonic() - t)
    t = time.monotonic()
    threads = [threading.Thread(target=write, args=(i, p)) for i, p in enumerate(paths)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    total = time.monotonic() - t
    fd = os.open(folder, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    write_s = max(w for w, _ in times.values())
    resident = evict(paths)
    cold = read_all(paths)
    warm = read_all(paths)
    for p in paths:
        os.unlink(p)
    mib = size * writers / MiB
    return {"mib": mib, "write": mib / write_s, "fsync_s": total - write_s,
            "synced": mib / total, "cold": mib / cold, "warm": mib / warm,
            "resident": resident}


def memory_test(total_bytes):
    """Anonymous memory of the checkpoint's size (as dsrt's staging buffer):
    MiB/s of writing it the first time (page faults) and again."""
    import mmap
    chunk = b"\1" * (64 << 20)
    n = total_bytes // len(chunk)
    m = mmap.mmap(-1, n * len(chunk))
    rates = []
    for _ in range(2):
        m.seek(0)
        t = time.monotonic()
        for _ in range(n):
            m.write(chunk)
        rates.append(n * len(chunk) / MiB / (time.monotonic() - t))
    m.close()
    return rates


# --------------------------------------------------------------------------

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def measure(a):
    """Runs everything; returns the path of the measurements' results.json."""
    K, E = a.interval, a.every_steps
    if K < 3 or E < 2:
        sys.exit("bench: --interval must be at least 3 and --every-steps at least 2")
    ranks_list = [int(x) for x in a.ranks.split(",")]
    t_start = time.monotonic()

    work = a.work or tempfile.mkdtemp(prefix="dsc-checkpoint-")
    os.makedirs(work, exist_ok=True)
    free = shutil.disk_usage(work).free
    if free < 12 * 2 ** 30:
        sys.exit(f"bench: {work}: {free / 2 ** 30:.1f} GiB free; the checkpoints need ~12 GiB")
    if not a.data:
        a.data = token_file(work)
    model = os.path.join(work, "model.onnx")
    print(run([PY, os.path.join(REPO, "models", "gpt.py"), "--size", "gpt2-small",
               "--seq", str(a.seq), "--batch", str(a.batch), "-o", model]).strip(), flush=True)
    plans, threads = {}, {}
    for n in ranks_list:
        cfg = {"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
               "steps_per_print": 1,
               "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.0}}}
        if n > 1:
            cfg["zero_optimization"] = {"stage": 3, "stage3_param_persistence_threshold": 0}
        path = os.path.join(work, f"ds_config-{n}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        plans[n] = os.path.join(work, f"plan-{n}")
        run([os.path.join(BIN, "dsc"), model, "--config", path, "--dp", str(n), "-o", plans[n]])
        threads[n] = 2 // n
    man = open(os.path.join(plans[ranks_list[0]], "manifest.txt")).read()
    n_params = int(re.search(r"parameters:\s+(\d+)", man).group(1))
    n_states = int(re.search(r"optimizer states:\s+(\d+)", man).group(1))
    state_bytes = (n_params + n_states) * 4
    print(f"{n_params / 1e6:.1f}M parameters + {n_states / 1e6:.1f}M optimizer states: "
          f"{state_bytes / MiB:.1f} MiB of float32 state", flush=True)

    disk = {n: [] for n in ranks_list}
    memory = []
    res = {}  # (ranks, name) -> [parsed runs]
    checks = []  # (ranks, what, ok)
    others = []

    def dsrt(n, name, rnd, extra, steps):
        outdir = os.path.join(work, f"run-{n}-{name}-r{rnd}")
        lines, _, other = run_timed(
            [DSRT, plans[n], "--data", a.data, "--steps", str(steps), "--threads",
             str(threads[n]), "--out", outdir] + extra, outdir + ".log")
        others.append(other)
        r = parse_run(lines, outdir)
        r["other"] = other
        if name not in ("none", "resume-cold"):  # those two are compared, then go
            os.unlink(os.path.join(outdir, "weights.safetensors"))
        res.setdefault((n, name), []).append(r)
        saves = ", ".join(f"{s['s']:.2f}s" + (f" (waited {s['waited']:.2f}s)"
                                              if s["waited"] is not None else "")
                          for s in r["saves"])
        print(f"round {rnd + 1}, {n} rank(s), {name}: "
              + (f"median iteration {med(list(r['iters'].values())[1:]) * 1000:.0f} ms, "
                 if len(r["iters"]) > 1 else "")
              + f"loop {r['loop']:.1f}s, "
              f"peak RSS {r['rss']} MiB" + (f", saves {saves}" if saves else "")
              + (f", restored in {r['restore']:.2f}s" if r["restore"] is not None else "")
              + f", other processes {other:.2f} cores", flush=True)
        return r, outdir

    def measure_disk(n, rnd, when):
        d = disk_test(work, state_bytes, n)
        d["when"] = f"round {rnd + 1}, {when} the {n}-rank runs"
        disk[n].append(d)
        print(f"round {rnd + 1}, disk, {n} writer(s), {when}: write {d['write']:.0f} MiB/s, "
              f"+ fsync {d['fsync_s']:.2f}s = {d['synced']:.0f} MiB/s; read cold "
              f"{d['cold']:.0f} MiB/s (resident after eviction: {d['resident']}), cached "
              f"{d['warm']:.0f} MiB/s", flush=True)

    for rnd in range(a.rounds):
        memory.append(memory_test(state_bytes))
        print(f"round {rnd + 1}, memory: first write {memory[-1][0]:.0f} MiB/s, again "
              f"{memory[-1][1]:.0f} MiB/s", flush=True)
        for n in ranks_list:
            measure_disk(n, rnd, "before")
            straight, sdir = dsrt(n, "none", rnd, [], 2 * K)
            for mode in ("sync", "async"):
                ck = os.path.join(work, f"ck-{n}-{mode}-1")
                dsrt(n, f"{mode}-every-1", rnd, ["--save-dir", ck, "--save-interval", "1",
                                                 "--keep", "1", "--save-mode", mode], E)
                shutil.rmtree(ck)
            cks = {}
            for mode in ("sync", "async"):
                cks[mode] = os.path.join(work, f"ck-{n}-{mode}-{K}")
                dsrt(n, f"{mode}-every-{K}", rnd, ["--save-dir", cks[mode], "--save-interval",
                                                   str(K), "--keep", "2", "--save-mode", mode],
                     2 * K)
            tag = f"step-{K:08d}"
            same = all(subprocess.run(
                ["cmp", "-s"] + [os.path.join(cks[m], tag, f"rank-{i:05d}.safetensors")
                                 for m in ("sync", "async")]).returncode == 0
                for i in range(n))
            checks.append((n, "async and sync checkpoints of step %d bytewise equal" % K, same))
            shutil.rmtree(cks["sync"])
            ck = os.path.join(cks["async"], tag)
            files = [os.path.join(ck, f) for f in sorted(os.listdir(ck))
                     if f.endswith(".safetensors")]
            resident = evict(files)
            cold, cdir = dsrt(n, "resume-cold", rnd, ["--resume", ck], 2 * K)
            cold["resident"] = resident
            ok = all(cold["losses"][s] == straight["losses"][s] for s in range(K + 1, 2 * K + 1))
            checks.append((n, f"resumed at step {K} (cold): losses of steps {K + 1}-{2 * K} "
                              "equal the straight run's", ok))
            ok = (sha256(os.path.join(cdir, "weights.safetensors"))
                  == sha256(os.path.join(sdir, "weights.safetensors")))
            for folder in (cdir, sdir):
                os.unlink(os.path.join(folder, "weights.safetensors"))
            checks.append((n, f"resumed at step {K} (cold): final weights bitwise the "
                              "straight run's", ok))
            warm, _ = dsrt(n, "resume-cached", rnd, ["--resume", ck], K + 1)
            checks.append((n, f"resumed at step {K} (cached): loss of step {K + 1} "
                              f"({warm['losses'][K + 1]}) equals the straight run's "
                              f"({straight['losses'][K + 1]})",
                           warm["losses"][K + 1] == straight["losses"][K + 1]))
            shutil.rmtree(cks["async"])
            measure_disk(n, rnd, "after")

    # What is large goes; the logs, metrics and results stay.
    for n in ranks_list:
        shutil.rmtree(plans[n])
    os.unlink(model)

    results = {"args": vars(a), "work": work, "n_params": n_params, "n_states": n_states,
               "minutes": (time.monotonic() - t_start) / 60, "disk": disk, "memory": memory,
               "checks": checks, "others": others,
               "res": [[n, name, runs] for (n, name), runs in res.items()]}
    path = os.path.join(work, "results.json")
    with open(path, "w") as f:
        json.dump(results, f)
    print(f"(measurements in {path})")
    return path


def tables(path):
    """The report of results.json: each figure the best (disk: fastest; runs:
    the round with the lowest median iteration) of the rounds; every round
    in the log lines."""
    with open(path) as f:
        data = json.load(f)
    a = argparse.Namespace(**data["args"])
    K = a.interval
    ranks_list = [int(x) for x in a.ranks.split(",")]
    n_params, state_bytes = data["n_params"], (data["n_params"] + data["n_states"]) * 4
    memory, checks, others = data["memory"], data["checks"], data["others"]
    disk = {int(n): v for n, v in data["disk"].items()}
    res = {}
    for n, name, runs in data["res"]:
        for r in runs:
            for key in ("iters", "compute", "losses"):
                r[key] = {int(s): v for s, v in r[key].items()}
        res[(n, name)] = runs

    def best(n, name):
        return min(res[(n, name)], key=lambda r: med(list(r["iters"].values())[1:]))

    dl = ["| writers | when | size MiB | write() MiB/s | fsync s | write + fsync MiB/s "
          "| read, evicted MiB/s | read, cached MiB/s |",
          "|---|---|---|---|---|---|---|---|"]
    for n in ranks_list:
        for d in disk[n]:
            res_txt = ("" if d["resident"] is None
                       else f" ({d['resident'] / MiB:.0f} MiB left resident)")
            dl.append(f"| {n} | {d['when']} | {d['mib']:.0f} | {d['write']:.0f} | "
                      f"{d['fsync_s']:.2f} | {d['synced']:.0f} | {d['cold']:.0f}{res_txt} | "
                      f"{d['warm']:.0f} |")

    sl = ["| ranks | run | saves | MiB per save (per rank) | save s, median (range) | MiB/s "
          "| / disk write + fsync | training waited s: first save / median of the others "
          "but the last / last (after the loop) |",
          "|---|---|---|---|---|---|---|---|"]
    tl = ["| ranks | run | steps | median iteration ms | vs no saving | median compute step ms "
          "| loop s (all steps, all saves) | vs no saving | cost of the save at step %d s "
          "| peak RSS MiB |" % K,
          "|---|---|---|---|---|---|---|---|---|---|"]
    ll = ["| ranks | restore | MiB | restored in s | MiB/s | disk read MiB/s (same state) "
          "| peak RSS MiB |",
          "|---|---|---|---|---|---|---|"]
    for n in ranks_list:
        dbest = max(disk[n], key=lambda d: d["synced"])
        none = best(n, "none")
        none_it = med(list(none["iters"].values())[1:])
        for name in ("none", "sync-every-1", "async-every-1", f"sync-every-{K}",
                     f"async-every-{K}"):
            r = best(n, name)
            it = med(list(r["iters"].values())[1:])
            comp = med(list(r["compute"].values())[1:])
            steps = len(r["iters"])
            same_len = steps == len(none["iters"])
            # The save at step K, mid-run: what iterations K .. 2K-1 took
            # beyond as many of their own median (K+1 .. 2K-1, most of
            # which the writer leaves alone; the step time of a run drifts
            # by 10-20% on 2 ranks, so no other run's or other stretch's
            # median is a fair base): the save or snapshot, the wait, the
            # steps slowed by the writer.
            mid = "-"
            if same_len and name != "none":
                base = med([r["iters"][s] for s in range(K + 1, 2 * K)])
                mid = f"{sum(r['iters'][s] for s in range(K, 2 * K)) - K * base:.2f}"
            tl.append(f"| {n} | {name} | {steps} | {it * 1000:.0f} | {it / none_it:.2f}x | "
                      f"{comp * 1000:.0f} | {r['loop']:.1f} | "
                      + (f"{r['loop'] / none['loop']:.2f}x" if same_len else "-")
                      + f" | {mid} | {r['rss']} |")
            if r["saves"]:
                secs = [s["s"] for s in r["saves"]]
                mib = r["saves"][0]["mib"]
                rate = mib / med(secs)
                waited = [s["waited"] for s in r["saves"] if s["waited"] is not None]
                wtxt = (f"{waited[0]:.2f} / "
                        + (f"{med(waited[1:-1]):.2f}" if len(waited) > 2 else "-")
                        + f" / {waited[-1]:.2f}" if waited else "= save (sync)")
                sl.append(f"| {n} | {name} | {len(secs)} | {mib:.0f} ({mib / n:.0f}) | "
                          f"{med(secs):.2f} ({min(secs):.2f}-{max(secs):.2f}) | {rate:.0f} | "
                          f"{rate / dbest['synced']:.2f}x | {wtxt} |")
        for name, label in (("resume-cold", "evicted"), ("resume-cached", "cached")):
            r = min(res[(n, name)], key=lambda r: r["restore"])
            rate = state_bytes / MiB / r["restore"]
            disk_rate = dbest["cold"] if name == "resume-cold" else dbest["warm"]
            ll.append(f"| {n} | {label} | {state_bytes / MiB:.0f} | {r['restore']:.2f} | "
                      f"{rate:.0f} | {disk_rate:.0f} | {r['rss']} |")

    rss_sync = {n: best(n, f"sync-every-{K}")["rss"] for n in ranks_list}
    rss_async = {n: best(n, f"async-every-{K}")["rss"] for n in ranks_list}
    rss_none = {n: best(n, "none")["rss"] for n in ranks_list}
    per_round = "; ".join(
        f"{n} rank(s) {name}: " + ", ".join(
            f"{med(list(r['iters'].values())[1:]) * 1000:.0f}" for r in res[(n, name)])
        for n in ranks_list for name in ("none", "sync-every-1", "async-every-1",
                                         f"sync-every-{K}", f"async-every-{K}"))
    iter_lists = "\n".join(
        f"- {n} rank(s) {name}: " + ", ".join(
            f"{s}: {best(n, name)['iters'][s] * 1000:.0f}/{best(n, name)['compute'][s] * 1000:.0f}"
            for s in sorted(best(n, name)["iters"]))
        for n in ranks_list for name in (f"sync-every-{K}", f"async-every-{K}"))
    text = (f"GPT-2 small (models/gpt.py --size gpt2-small --seq {a.seq} --batch {a.batch}: "
            f"{n_params / 1e6:.1f}M parameters, dropout 0.1), float32, AdamW; state "
            f"{state_bytes / MiB:.1f} MiB (parameters + exp_avg + exp_avg_sq); "
            + ", ".join({1: "1 rank x 2 threads", 2: "2 ranks (dp 2, ZeRO 3) x 1 thread"}[n]
                        for n in ranks_list)
            + f"; {a.rounds} round(s), "
            f"{data['minutes']:.1f} minutes in all\n\n"
            "Disk (python, the checkpoint's size; 2 writers: two halves at once):\n\n"
            + "\n".join(dl) + "\n\nAnonymous memory of that size (python mmap; MiB/s): "
            "first write " + ", ".join(f"{m[0]:.0f}" for m in memory) + "; again "
            + ", ".join(f"{m[1]:.0f}" for m in memory)
            + ".\n\nSave (dsrt's `dsrt: checkpoint` lines; `/ disk` against "
            "the best write + fsync of the same writers):\n\n" + "\n".join(sl)
            + "\n\nWhat saving costs training (an iteration: the wall time between two step "
            "lines, step 1 left out; compute step: metrics.csv, the step alone):\n\n"
            + "\n".join(tl) + "\n\nLoad (`restored in` of `dsrt: resuming`, the slowest "
            "rank; evicted: the checkpoint's files dropped from the page cache first):\n\n"
            + "\n".join(ll) + "\n\n"
            + "Peak RSS, async minus sync (the staging buffer): "
            + ", ".join(f"{n} rank(s) {rss_async[n] - rss_sync[n]:+d} MiB per rank "
                        f"(state per rank {state_bytes / MiB / n:.0f} MiB; no saving "
                        f"{rss_none[n]} MiB)" for n in ranks_list) + ".\n\n"
            + "Checks:\n\n" + "\n".join(f"- {n} rank(s): {what}: {'yes' if ok else 'NO'}"
                                         for n, what, ok in checks) + "\n\n"
            + "Saves per run (s; async: training waited s):\n\n" + "\n".join(
                f"- {n} rank(s) {name}: " + ", ".join(
                    f"step {s['step']} {s['s']:.2f}"
                    + (f" ({s['waited']:.2f})" if s["waited"] is not None else "")
                    for s in best(n, name)["saves"])
                for n in ranks_list for name in ("sync-every-1", "async-every-1",
                                                 f"sync-every-{K}", f"async-every-{K}"))
            + "\n\n"
            + f"Iterations of the every-{K} runs, step: wall / compute ms:\n\n{iter_lists}\n\n"
            + f"Median iteration per round (ms): {per_round}.\n"
            + f"Other processes kept {statistics.mean(others):.2f} cores busy on average "
              f"during the runs (at most {max(others):.2f}; /proc/stat minus the run's own "
              "CPU time).\n")
    return text, all(ok for _, _, ok in checks)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--interval", type=int, default=10,
                    help="steps between saves of the 'every few steps' runs (they run twice "
                         "as many steps; at least 3)")
    ap.add_argument("--every-steps", type=int, default=4,
                    help="steps of the runs that save every step")
    ap.add_argument("--rounds", type=int, default=1, help="times the whole set runs")
    ap.add_argument("--ranks", default="1,2", help="1, 2 or 1,2")
    ap.add_argument("--data", help="uint16 token file (default: built from the repo's text)")
    ap.add_argument("--work", help="folder for the model, plans, runs and checkpoints "
                                   "(default: a new temp dir; it must be on the disk to test)")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--report", metavar="RESULTS_JSON",
                    help="measure nothing: the tables of an earlier run's WORK/results.json")
    a = ap.parse_args()
    path = a.report or measure(a)
    text, ok = tables(path)
    report(text, a.markdown)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
