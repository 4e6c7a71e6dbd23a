#!/usr/bin/env bash
# 1-bit Adam trained by dsc + dsrt under several data-parallel layouts, each
# against the PyTorch reference of DeepSpeed's OnebitAdam and
# compressed_allreduce simulated over as many workers (reference_train.py
# --dp, ds_optimizers.OnebitAdamRule).
#
#   onebit-parity.sh DSC DSRT PYTHON WORKDIR CONFIG LAYOUTS [export flags...]
#
# CONFIG: micro-batch 4, any accumulation, on one rank. LAYOUTS: rN (N
# data-parallel ranks, the config's accumulation kept: N times the batch),
# each trained for OPT_STEPS (20) steps and compared by compare.py
# (OPT_LOSS_RTOL 1e-6, OPT_WEIGHT_ATOL 1e-6). Prints "OK   LAYOUT: ..." and,
# for N > 1, the communication dsrt counted in the first step and the last
# (metrics.csv's comm_bytes), failing when the last moves more than 1/16 of
# the first's bytes.
set -euo pipefail
if [ $# -lt 6 ]; then
  echo "usage: $0 DSC DSRT PYTHON WORKDIR CONFIG LAYOUTS [export flags...]" >&2
  exit 2
fi
DSC=$1 DSRT=$2 PY=$3 WORK=$4 CONFIG=$5 LAYOUTS=$6
shift 6
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STEPS=${OPT_STEPS:-20}
rm -rf "$WORK"
mkdir -p "$WORK"
"$PY" "$REPO/models/gpt.py" "$@" --dropout 0 --batch 4 --dynamic-batch -o "$WORK/model.onnx" \
  > /dev/null 2>&1
"$PY" "$HERE/make_data.py" --onnx "$WORK/model.onnx" --samples 128 -o "$WORK/data" > /dev/null 2>&1
# bf16.enabled: the reference trains dsc's bf16 mixed precision.
PRECISION=$("$PY" -c 'import json, sys; c = json.load(open(sys.argv[1]))
print("bf16" if (c.get("bf16") or {}).get("enabled") else "fp32")' "$CONFIG")
failures=0
for layout in $LAYOUTS; do
  n=${layout#r}
  # N ranks, each the config's micro-batches: the reference accumulates
  # N x GA micro-batches, micro-batch j being worker j % N's.
  "$PY" - "$CONFIG" "$WORK/$layout.json" "$WORK/$layout.ref.json" "$n" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
n = int(sys.argv[4])
ga = c["gradient_accumulation_steps"]
c["train_batch_size"] = c["train_micro_batch_size_per_gpu"] * ga * n
json.dump(c, open(sys.argv[2], "w"))
ref = dict(c, gradient_accumulation_steps=ga * n)
json.dump(ref, open(sys.argv[3], "w"))
PYEOF
  if ! "$PY" "$HERE/reference_train.py" --onnx "$WORK/model.onnx" --config "$WORK/$layout.ref.json" \
         --precision "$PRECISION" --dp "$n" --data "$WORK/data" --steps "$STEPS" --out "$WORK/$layout.torch" \
         > "$WORK/$layout.torch.log" 2>&1; then
    echo "FAIL $layout: the reference failed"
    cat "$WORK/$layout.torch.log"
    failures=$((failures + 1))
    continue
  fi
  if ! { "$DSC" "$WORK/model.onnx" --config "$WORK/$layout.json" --dp "$n" -o "$WORK/$layout.plan" &&
         "$DSRT" "$WORK/$layout.plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --threads 1 \
           --out "$WORK/$layout.run"; } > "$WORK/$layout.log" 2>&1; then
    echo "FAIL $layout: training failed"
    cat "$WORK/$layout.log"
    failures=$((failures + 1))
    continue
  fi
  if out=$("$PY" "$HERE/compare.py" "$WORK/$layout.run" "$WORK/$layout.torch" \
             --loss-rtol "${OPT_LOSS_RTOL:-1e-6}" --weight-atol "${OPT_WEIGHT_ATOL:-1e-6}" -q 2>&1); then
    echo "OK   $layout: $(echo "$out" | tail -1 | sed 's/^compare: OK: //')"
  else
    echo "FAIL $layout:"
    echo "$out"
    failures=$((failures + 1))
  fi
  if [ "$n" -gt 1 ]; then
    if "$PY" - "$WORK/$layout.run/metrics.csv" "$layout" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
first, last = rows[0], rows[-1]
ratio = float(first["comm_bytes"]) / float(last["comm_bytes"])
print("COMM %s: step 1 %d bytes in %d calls, step %s %d bytes in %d calls, 1/%.1f (%s 1/16)"
      % (sys.argv[2], float(first["comm_bytes"]), float(first["comm_calls"]), last["step"],
         float(last["comm_bytes"]), float(last["comm_calls"]), ratio,
         "at most" if ratio >= 16 else "MORE THAN"))
sys.exit(0 if ratio >= 16 else 1)
PYEOF
  then :; else failures=$((failures + 1)); fi
  fi
done
exit $((failures > 0))
