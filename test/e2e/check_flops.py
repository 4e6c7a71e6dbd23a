#!/usr/bin/env python3
"""Checks dsrt's flops profile of the bundled GPT against a hand count.

    check_flops.py RUN MANIFEST REPORT --layers L --d-model D --heads H
        --vocab V --seq T --batch B --micro-batches M

RUN/flops_profile.csv holds the profiled step's figures unrounded; MANIFEST
is the plan's manifest.txt ("flops per step: forward F, backward G"); REPORT
the printed profile. Checks:

  * the forward's GEMM flops equal the hand count of the model: per layer
    the QKV, output, MLP-in and MLP-out projections (2 BT d (3d + d + 4d +
    4d)) and the two attention products (2 x 2 B H T^2 (d/H)), and the LM
    head (2 BT d V), for each of the M micro-batches;
  * the backward's GEMMs are twice the forward's (each GEMM's two operand
    gradients: no GEMM of this model has a constant operand);
  * the forward and backward totals equal the manifest's, computed by dsc
    before the run;
  * the MFU the report prints is (fwd + bwd flops) / iter latency / peak.
"""
import argparse
import csv
import re
import sys


def fail(msg):
    print("check_flops: FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("manifest")
    ap.add_argument("report")
    for k in ("layers", "d-model", "heads", "vocab", "seq", "batch", "micro-batches"):
        ap.add_argument("--" + k, type=int, required=True)
    a = ap.parse_args()
    L, d, H, V, T, B, M = (a.layers, a.d_model, a.heads, a.vocab, a.seq, a.batch,
                           a.micro_batches)
    bt = B * T
    hand = M * (L * (2 * bt * d * (3 * d + d + 4 * d + 4 * d) + 2 * 2 * B * H * T * T * (d // H))
                + 2 * bt * d * V)
    rows = list(csv.DictReader(open(a.run + "/flops_profile.csv")))

    def get(kind, name, phase):
        for r in rows:
            if r["kind"] == kind and r["name"] == name and r["phase"] == phase:
                return r
        fail("flops_profile.csv has no %s %s %s" % (kind, name, phase))

    fwd_mm = float(get("op", "nn.matmul", "fwd")["flops"])
    bwd_mm = float(get("op", "nn.matmul", "bwd")["flops"])
    if fwd_mm != hand:
        fail("forward GEMM flops %d, the hand count %d" % (fwd_mm, hand))
    if bwd_mm != 2 * fwd_mm:
        fail("backward GEMM flops %d, not 2 x the forward's %d" % (bwd_mm, fwd_mm))
    fwd = float(get("phase", "fwd", "fwd")["flops"])
    bwd = float(get("phase", "bwd", "bwd")["flops"])
    m = re.search(r"flops per step:\s+forward (\d+), backward (\d+)", open(a.manifest).read())
    if not m:
        fail("%s states no flops per step" % a.manifest)
    if (int(m.group(1)), int(m.group(2))) != (fwd, bwd):
        fail("profiled forward %d and backward %d, the manifest's %s and %s"
             % (fwd, bwd, m.group(1), m.group(2)))
    peak = float(get("peak", "peak", "all")["flops"])
    it = float(get("iter", "iter", "all")["seconds"])
    mfu = re.search(r"MFU = FLOPS per rank / peak:\s+([0-9.]+)%", open(a.report).read())
    if not mfu or peak <= 0:
        fail("the report states no MFU against a measured peak")
    want = 100.0 * (fwd + bwd) / it / peak
    if abs(float(mfu.group(1)) - want) > 0.05 + 1e-9:
        fail("MFU %s%%, (fwd + bwd) / iter / peak = %.3f%%" % (mfu.group(1), want))
    print("check_flops: OK: forward GEMMs %d flops = the hand count, backward GEMMs 2x; "
          "forward %d and backward %d flops = the manifest's; MFU %s%% = %.0f flops / %.6f s "
          "/ peak" % (fwd_mm, fwd, bwd, mfu.group(1), fwd + bwd, it))


if __name__ == "__main__":
    main()
