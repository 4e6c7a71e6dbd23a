#!/usr/bin/python3
"""The runtime's communication counters against the compiler's prediction.

    check_comm.py PLAN/manifest.txt DSRT_OUTPUT [--bucket ELEMENTS]

The manifest's "communication per step" lists, per kind, calls and elements
of one step (ZeRO units: an all-reduce of n elements counts 2n). dsrt's rank
0 prints "dsrt: communication per step: all_reduce 1 call 58112 elements,
..." for the last step. They must agree exactly; with P parameters the total
must be 2P for stage 0, 2P + 2 for stage 1 (+2: the gradient norm's
all-reduce), (M + 1)P + 2 for stage 2 with M micro-batches per step (the
gradients are reduce-scattered in every micro-batch, as DeepSpeed does, so
only a chunk is kept), and at most 3MP + 2 for stage 3 (parameters gathered
for the forward and backward pass of every micro-batch). With M = 1 that is
2P, 2P and 3P. Single-rank plans print none of it.
With --bucket (the reduce and gather bucket size, in elements), each
kind's calls must be at most ceil(elements / bucket) plus 2M + 2: one
partial bucket per micro-batch phase (forward and backward gathers, the
per-micro-batch reductions) and the norm. Prints one summary line; exits 1
on a mismatch.
"""
import re
import sys


def fail(msg):
    print("check_comm: FAIL: " + msg)
    sys.exit(1)


manifest = open(sys.argv[1]).read()
output = open(sys.argv[2]).read()
m = re.search(r"data parallel: +(\d+) ranks, ZeRO stage (\d), P = (\d+) parameters", manifest)
if not m or m.group(1) == "1":
    if "communication per step" in output:
        fail("a single-rank plan reported communication")
    print("single rank, no communication")
    sys.exit(0)
dp, stage, P = (int(x) for x in m.groups())
M = int(re.search(r"^schedule: +\d+ prologue \+ (\d+) x", manifest, re.M).group(1))
predicted = {k: (int(c), int(e)) for k, c, e in
             re.findall(r"^  (all_reduce|reduce_scatter|all_gather): (\d+) calls?, (\d+) elements",
                        manifest, re.M)}
line = re.search(r"^dsrt: communication per step: (.*)$", output, re.M)
if not line:
    fail("dsrt printed no communication counters")
measured = {k: (int(c), int(e)) for k, c, e in
            re.findall(r"(all_reduce|reduce_scatter|all_gather) (\d+) calls? (\d+) elements",
                       line.group(1))}
if measured != predicted:
    fail("measured %s, predicted %s" % (measured, predicted))
total = sum(e for _, e in measured.values())
bound = {0: 2 * P, 1: 2 * P + 2, 2: (M + 1) * P + 2}.get(stage, 3 * M * P + 2)
if (stage < 3 and total != bound) or total > bound:
    fail("%d elements per step; theory says %s%d (P = %d, %d micro-batches)"
         % (total, "" if stage < 3 else "at most ", bound, P, M))
if len(sys.argv) > 4 and sys.argv[3] == "--bucket":
    bucket = int(sys.argv[4])
    for kind, (calls, elements) in measured.items():
        whole = elements // 2 if kind == "all_reduce" else elements
        limit = -(-whole // bucket) + 2 * M + 2
        if calls > limit:
            fail("%s: %d calls for %d elements in buckets of %d (at most %d)"
                 % (kind, calls, whole, bucket, limit))
print("comm %d elements = %.3f P in %d calls, as predicted"
      % (total, total / P, sum(c for c, _ in measured.values())))
