#!/usr/bin/env python3
"""Checks a run's comms.csv (comms_logger) against its metrics.csv.

    check_comms.py RUN [--ops OP,OP] [--messages N]

comms.csv has one row per (op, group size, message bytes S) with the count,
latencies, algbw = S x 8 / (avg latency in ms x 1e6) Gbit/s and busbw =
algbw x NCCL-tests' factor (all_reduce 2(n-1)/n; all_gather,
reduce_scatter, all_to_all (n-1)/n; send, recv 1). Checks those formulas on
every row, that the collectives' counts add up to metrics.csv's comm_calls
over the run and their bytes (an all_reduce twice, as metrics.csv counts
it) to its comm_bytes (when --ops does not filter them), --ops: exactly
these op names appear; --messages N: send and recv each appear N times.
"""
import argparse
import csv
import math
import os
import sys


def fail(msg):
    print("check_comms: FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--ops")
    ap.add_argument("--messages", type=int)
    a = ap.parse_args()
    rows = list(csv.DictReader(open(os.path.join(a.run, "comms.csv"), newline="")))
    metrics = list(csv.DictReader(open(os.path.join(a.run, "metrics.csv"), newline="")))
    if not rows:
        fail("comms.csv has no rows")
    calls = nbytes = 0
    for r in rows:
        n, s, count = int(r["group_size"]), int(r["message_bytes"]), int(r["count"])
        avg, total = float(r["avg_latency_ms"]), float(r["total_latency_ms"])
        # comms.csv prints milliseconds with 6 decimals: each value is within
        # 5e-7 of its own, so avg x count is within (count + 1) x 5e-7 of total.
        if count < 1 or not math.isclose(avg * count, total, rel_tol=1e-6,
                                         abs_tol=(count + 1) * 5e-7):
            fail("%s: count %d, total %g, avg %g disagree" % (r["op"], count, total, avg))
        if not float(r["min_latency_ms"]) <= avg <= float(r["max_latency_ms"]):
            fail("%s: the average %g is not between min and max" % (r["op"], avg))
        algbw = s * 8 / (avg * 1e6)
        factor = (2 * (n - 1) / n if r["op"] == "all_reduce" else
                  (n - 1) / n if r["op"] in ("all_gather", "reduce_scatter", "all_to_all")
                  else 1.0)
        if not math.isclose(float(r["algbw_gbps"]), algbw, rel_tol=1e-3, abs_tol=1e-6) or \
                not math.isclose(float(r["busbw_gbps"]), algbw * factor, rel_tol=1e-3,
                                 abs_tol=1e-6):
            fail("%s: algbw %s, busbw %s; S / t gives %g and %g" % (
                r["op"], r["algbw_gbps"], r["busbw_gbps"], algbw, algbw * factor))
        if r["op"] not in ("send", "recv"):
            calls += count
            nbytes += count * s * (2 if r["op"] == "all_reduce" else 1)
    ops = sorted({r["op"] for r in rows})
    if a.ops is not None and ops != sorted(a.ops.split(",")):
        fail("ops %s, expected %s" % (ops, sorted(a.ops.split(","))))
    if a.ops is None and "comm_calls" in metrics[0]:
        want_calls = sum(int(float(m["comm_calls"])) for m in metrics)
        want_bytes = sum(int(float(m["comm_bytes"])) for m in metrics)
        if (calls, nbytes) != (want_calls, want_bytes):
            fail("%d collectives of %d bytes; metrics.csv says %d of %d" % (
                calls, nbytes, want_calls, want_bytes))
    if a.messages is not None:
        for op in ("send", "recv"):
            got = sum(int(r["count"]) for r in rows if r["op"] == op)
            if got != a.messages:
                fail("%d %s messages, expected %d" % (got, op, a.messages))
    print("check_comms: OK: %d rows (%s); %d collectives, %d bytes%s" % (
        len(rows), ", ".join(ops), calls, nbytes,
        ", as metrics.csv counts them" if a.ops is None else ""))


if __name__ == "__main__":
    main()
