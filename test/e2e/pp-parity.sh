#!/usr/bin/env bash
# Pipeline parallelism end to end: every (pp, dp, ZeRO stage) of the matrix
# trains the same model on the same global batches as a single-rank run,
# and must match it.
#
#   pp-parity.sh DSC DSRT PYTHON WORKDIR
#
# Model: a 2-layer GPT with a tied head (the embedding is held by the first
# and the last stage), dropout 0, micro-batch 2. Each step runs M = 4
# micro-batches per data-parallel rank, so the global batch is 2 x 4 x dp
# and the reference is one rank with gradient accumulation 4 x dp. AdamW,
# clipping 1.0 (the global norm over every stage and shard).
# For each run: the loss of every step within PP_LOSS_RTOL (1e-5) relative
# and the final weights within PP_WEIGHT_ATOL (1e-4) absolute. Measured on an
# AMD EPYC Zen 4 (AVX-512, no AMX): losses within 1.6e-7, weights within 1e-6
# (the attention's key bias, whose gradient is zero in exact arithmetic, so
# that AdamW scales its rounding noise to steps of up to lr, and an MLP
# weight; the stages sum the gradients of the micro-batches and of the tied
# embedding's two uses in another order). The bounds are ~100x that: the
# noise follows the kernels' summation orders, which another CPU's kernels
# (AVX2 only, AMX) change.
# Each run prints one line: "OK   NAME: S steps, loss rel diff max X <= rtol
# R; T tensors, weight abs diff max Y <= atol A".
# Environment: PP_STEPS (6), PP_STAGES ("2 4"), PP_RANKS ("1 2"),
# PP_ZERO ("0 1 2 3"); the extra runs cover the zb-h1 schedule and the
# uniform and parameters partitions.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 DSC DSRT PYTHON WORKDIR" >&2
  exit 2
fi
DSC=$1 DSRT=$2 PY=$3 WORK=$4
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STEPS=${PP_STEPS:-6}
LOSS_RTOL=${PP_LOSS_RTOL:-1e-5}
WEIGHT_ATOL=${PP_WEIGHT_ATOL:-1e-4}
M=4

rm -rf "$WORK"
mkdir -p "$WORK"
"$PY" "$REPO/models/gpt.py" --size tiny --layers 2 --tied --dropout 0 --dynamic-batch \
  -o "$WORK/gpt.onnx" > /dev/null
"$PY" "$HERE/make_data.py" --onnx "$WORK/gpt.onnx" --samples 64 -o "$WORK/data" > /dev/null

config() { # GA DP -> ds_config on stdout
  cat <<JSON
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": $1,
  "train_batch_size": $((2 * $1 * $2)),
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}},
  "zero_optimization": {"stage3_param_persistence_threshold": 0, "overlap_comm": true,
                        "reduce_bucket_size": 20000, "allgather_bucket_size": 20000,
                        "stage3_prefetch_bucket_size": 20000}
}
JSON
}

declare -A refs
failures=0
runs=0
run() { # NAME PP DP ZERO [dsc flags...]
  local name=$1 pp=$2 dp=$3 zero=$4
  shift 4
  local refga=$((M * dp)) ref="$WORK/ref-ga$((M * dp))"
  if [ -z "${refs[$refga]:-}" ]; then
    config "$refga" 1 > "$ref.json"
    "$DSC" "$WORK/gpt.onnx" --config "$ref.json" -o "$ref.plan"
    "$DSRT" "$ref.plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --threads 1 \
      --out "$ref.run" > /dev/null
    refs[$refga]=1
  fi
  local r="$WORK/$name"
  runs=$((runs + 1))
  config "$M" "$dp" > "$r.json"
  "$DSC" "$WORK/gpt.onnx" --config "$r.json" --pp "$pp" --dp "$dp" --zero "$zero" "$@" -o "$r.plan"
  "$DSRT" "$r.plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --threads 1 \
    --out "$r.run" > "$r.log" 2>&1 || { echo "FAIL $name: dsrt failed"; cat "$r.log"; failures=$((failures + 1)); return; }
  if out=$("$PY" "$HERE/compare.py" "$ref.run" "$r.run" --loss-rtol "$LOSS_RTOL" \
             --weight-atol "$WEIGHT_ATOL" -q 2>&1); then
    echo "OK   $name: $(echo "$out" | tail -1 | sed 's/^compare: OK: //')"
  else
    echo "FAIL $name:"
    echo "$out"
    failures=$((failures + 1))
  fi
}
for pp in ${PP_STAGES:-2 4}; do
  for dp in ${PP_RANKS:-1 2}; do
    for zero in ${PP_ZERO:-0 1 2 3}; do
      run "pp$pp-dp$dp-zero$zero" "$pp" "$dp" "$zero"
    done
  done
done
run "pp4-dp1-zero0-zbh1" 4 1 0 --schedule zb-h1
run "pp2-dp2-zero2-zbh1" 2 2 2 --schedule zb-h1
run "pp4-dp1-zero0-uniform" 4 1 0 --partition uniform
run "pp3-dp1-zero1-parameters" 3 1 1 --partition parameters
if [ "$failures" -ne 0 ]; then
  echo "pp-parity: $failures of $runs runs differ from the single-rank reference"
  exit 1
fi
echo "pp-parity: all $runs runs match the single-rank reference ($STEPS steps; loss rtol $LOSS_RTOL, weight atol $WEIGHT_ATOL)"
