#!/usr/bin/python3
"""This machine's hardware file for dsc --simulate, measured.

    /usr/bin/python3 bench/calibrate.py -o this-machine.json [--quick]

It times dsrt's own kernels and links (nothing of a training step):
- GEMMs through dsrt's matmul on one thread (dsrt_calibrate_bench gemm), a
  ladder of shapes from 64 x 128 x 128 to 1024 x 1024 x 1024 (a linear
  layer's forward, dx and dW), fp32 and bf16, the operands cycled through
  24 MB of copies so that they come from the L3 cache or memory, as in a
  training step, not from the core's own caches; each dtype's rate and latency are the least-squares fit of
  time = latency + flops / rate (relative error). thread_efficiency.gemm
  is the same fit on every core against one core's rate times the cores
  (and so for memory and elementwise below).
- An elementwise add (dsrt_calibrate_bench memory) from 12 KB to 200 MB on
  one thread: the moves that fit in the L3 cache (lscpu) give `cache`, the
  larger ones `memory`.
- The elementwise kernels whose arithmetic, not their bytes, sets their
  time (GELU's erf, exp, tanh, softmax, layer norm, dropout's random bits)
  on 256K cached elements (dsrt_calibrate_bench kernels): ns per element.
- dsrt's MPI all-reduce, all-gather and a message between 2 local ranks
  (mpirun -np 2 dsrt_calibrate_bench comm), 4 KiB to 64 MiB: each fitted
  as nccl-tests' bus bandwidth and a latency per ring step.
- peak_tflops: the fastest GEMM measured per core (a CPU has no data
  sheet figure dsrt can reach: MFU on this machine is of that rate).
The file records lscpu's model and flags: machines differ.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, run  # noqa: E402

SHAPES = ["64x128x128", "128x128x384", "256x128x512", "512x128x384", "512x384x128",
          "512x128x512", "512x512x128", "1024x256x256", "512x512x512", "1024x512x1024",
          "1024x1024x1024"]
QUICK = ["128x128x384", "512x128x512", "512x512x512", "1024x1024x1024"]


def fit(points):
    """(latency, rate) minimising the relative error of latency + work / rate
    over (work, seconds) points; latency >= 0."""
    s00 = s01 = s11 = r0 = r1 = 0.0
    for w, t in points:
        a, b = 1.0 / t, w / t           # the row (1, w) scaled by 1 / t
        s00 += a * a; s01 += a * b; s11 += b * b
        r0 += a; r1 += b                # against t / t = 1
    det = s00 * s11 - s01 * s01
    lat = (r0 * s11 - r1 * s01) / det
    inv = (s00 * r1 - s01 * r0) / det
    if lat < 0 or inv <= 0:            # a rate alone
        lat = 0.0
        inv = sum(w / t for w, t in points) / sum((w / t) ** 2 for w, t in points)
    return lat, 1.0 / inv


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = dict(re.findall(r"^([^:]+):\s*(.*)$", out, re.M))
    return info


def cache_bytes(info):
    m = re.match(r"([\d.]+)\s*(KiB|MiB|GiB)", info.get("L3 cache", ""))
    if not m:
        return 0
    return int(float(m.group(1)) * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)])


def gemm_times(shapes, threads):
    out = run([os.path.join(BIN, "dsrt_calibrate_bench"), "gemm", "--threads", str(threads),
               "--reps", "3"] + sum([["--shape", s] for s in shapes], []))
    f32, bf16 = [], []
    for line in out.splitlines():
        r = json.loads(line)
        (f32 if r["dtype"] == "f32" else bf16).append((r["flops"], r["seconds"]))
    return f32, bf16


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", required=True, help="the hardware file to write")
    p.add_argument("--quick", action="store_true", help="fewer GEMM shapes")
    a = p.parse_args()
    if os.path.exists(a.output):
        with open(a.output) as f:
            if "measured by bench/calibrate.py" not in f.read():
                sys.exit(f"calibrate: {a.output} exists and was not written by bench/calibrate.py: "
                         "choose another -o")
    info = lscpu()
    cores = os.cpu_count()
    shapes = QUICK if a.quick else SHAPES

    print(f"== GEMMs on 1 thread ({len(shapes)} shapes x 3 forms)", flush=True)
    f32, bf16 = gemm_times(shapes, 1)
    lat32, rate32 = fit(f32)
    lat16, rate16 = fit(bf16)
    print(f"  f32  {rate32 / 1e9:8.1f} GFLOP/s, latency {lat32 * 1e6:.1f} us")
    print(f"  bf16 {rate16 / 1e9:8.1f} GFLOP/s, latency {lat16 * 1e6:.1f} us")
    eff = {}
    if cores > 1:
        m32, m16 = gemm_times(shapes, cores)
        eff["gemm"] = (fit(m32)[1] / rate32 + fit(m16)[1] / rate16) / (2 * cores)
        print(f"  {cores} threads reach {eff['gemm']:.2f} x {cores} x one thread's rate")
    peak = max(max(w / t for w, t in f32), max(w / t for w, t in bf16))

    print("== elementwise add on 1 thread", flush=True)
    out = run([os.path.join(BIN, "dsrt_calibrate_bench"), "memory", "--threads", "1"])
    adds = [json.loads(l) for l in out.splitlines()]
    l3 = cache_bytes(info)
    if cores > 1:
        out = run([os.path.join(BIN, "dsrt_calibrate_bench"), "memory", "--threads", str(cores)])
        many = [json.loads(l) for l in out.splitlines()]
        # The moves a training step makes: those that fit in the cache.
        pairs = [(o["seconds"], m["seconds"]) for o, m in zip(adds, many)
                 if not l3 or o["bytes"] <= l3 / 2]
        eff["memory"] = sum(o / m for o, m in pairs) / len(pairs) / cores
        print(f"  {cores} threads reach {eff['memory']:.2f} x {cores} x one thread's bandwidth")
    small = [(r["bytes"], r["seconds"]) for r in adds if l3 and r["bytes"] <= l3 / 2]
    large = [(r["bytes"], r["seconds"]) for r in adds if not l3 or r["bytes"] > 2 * l3]
    mem_lat, mem_rate = fit(large) if len(large) >= 2 else (0.0, large[0][0] / large[0][1])
    print(f"  memory {mem_rate / 1e9:.1f} GB/s")
    cache = None
    if len(small) >= 2:
        c_lat, c_rate = fit(small)
        cache = {"bytes": l3, "gbps": round(c_rate / 1e9, 3), "latency_us": round(c_lat * 1e6, 3)}
        print(f"  cache (L3, {l3 >> 20} MiB) {c_rate / 1e9:.1f} GB/s, latency {c_lat * 1e6:.2f} us")

    print("== elementwise kernels whose arithmetic sets their time, 1 thread", flush=True)
    out = run([os.path.join(BIN, "dsrt_calibrate_bench"), "kernels", "--threads", "1"])
    elementwise = {}
    for line in out.splitlines():
        r = json.loads(line)
        elementwise[r["op"]] = round(r["seconds"] / r["elements"] * 1e9, 4)
    print("  " + ", ".join(f"{k} {v:.2f} ns" for k, v in elementwise.items()))
    if cores > 1:
        out = run([os.path.join(BIN, "dsrt_calibrate_bench"), "kernels", "--threads", str(cores)])
        ratios = [elementwise[r["op"]] / (r["seconds"] / r["elements"] * 1e9)
                  for r in map(json.loads, out.splitlines())]
        eff["elementwise"] = sum(ratios) / len(ratios) / cores
        print(f"  {cores} threads reach {eff['elementwise']:.2f} x {cores} x one thread's rate")

    print("== MPI between 2 local ranks", flush=True)
    out = run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
               "-x", "OMP_NUM_THREADS=1", os.path.join(BIN, "dsrt_calibrate_bench"), "comm"])
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    link = {}
    for kind, factor, steps in (("all_reduce", 1.0, 2), ("all_gather", 0.5, 1), ("send", 1.0, 1)):
        pts = [(r["bytes"], r["seconds"]) for r in rows if r["kind"] == kind]
        lat, rate = fit(pts)               # seconds = lat + bytes / rate
        link[kind] = {"bus_gbps": round(factor * rate / 1e9, 4),
                      "latency_us": round(lat / steps * 1e6, 3)}
        print(f"  {kind:10s} bus {factor * rate / 1e9:.2f} GB/s, latency {lat / steps * 1e6:.1f} us"
              " per step")

    hw = {
        "name": f"this machine: {info.get('Model name', 'unknown CPU')}, {cores} cores",
        "source": "measured by bench/calibrate.py (dsrt_calibrate_bench); lscpu flags: "
                  + " ".join(f for f in info.get("Flags", "").split()
                             if f.startswith(("avx", "amx", "fma"))),
        "devices_per_node": 0,
        "cores": cores,
        "thread_efficiency": {k: round(v, 4) for k, v in eff.items()},
        "peak_tflops": {"f32": round(peak / 1e12, 6), "bf16": round(peak / 1e12, 6)},
        "gemm": {"f32": {"tflops": round(rate32 / 1e12, 6), "latency_us": round(lat32 * 1e6, 3)},
                 "bf16": {"tflops": round(rate16 / 1e12, 6), "latency_us": round(lat16 * 1e6, 3)}},
        "memory": {"gbps": round(mem_rate / 1e9, 3), "latency_us": round(mem_lat * 1e6, 3)},
        "vector_tflops": round(rate32 / 1e12, 6),
        "elementwise_ns": elementwise,
        "instruction_us": 0,
        "intra_node": dict(link["all_gather"], all_reduce=link["all_reduce"], send=link["send"]),
        "comm_overlaps_compute": False,
    }
    if cache:
        hw["cache"] = cache
    with open(a.output, "w") as f:
        json.dump(hw, f, indent=2)
        f.write("\n")
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
