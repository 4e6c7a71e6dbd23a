"""bf16_curve.py FP32_RUN BF16_RUN TOLERANCE: the bf16 run's loss curve ends
within TOLERANCE (relative) of the fp32 run's, both started from the same
weights on the same data: the mean loss of the last 50 steps is compared
(one step's loss moves with the batch; the mean does not). Also checks
that the bf16 run learned (its last mean is below its first loss) and that
both wrote fp32 weights (the master weights, not the bf16 copies)."""
import csv
import json
import struct
import sys


def losses(run):
    with open(run + "/metrics.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def dtypes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


fp32, bf16, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
a, b = losses(fp32), losses(bf16)
assert len(a) == len(b) >= 100, (len(a), len(b))
ma, mb = sum(a[-50:]) / 50, sum(b[-50:]) / 50
rel = abs(mb - ma) / ma
print("bf16_curve: fp32 %.4f -> %.4f, bf16 %.4f -> %.4f (last 50 steps), %.2f%% apart"
      % (a[0], ma, b[0], mb, 100 * rel))
assert mb < b[0] * 0.9, "the bf16 run did not learn"
assert rel <= tol, "bf16 ends %.2f%% from fp32 (more than %.2f%%)" % (100 * rel, 100 * tol)
for run in (fp32, bf16):
    assert dtypes(run + "/weights.safetensors") == {"F32"}, run
print("bf16_curve: OK")
