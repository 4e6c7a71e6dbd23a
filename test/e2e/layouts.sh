#!/usr/bin/env bash
# One model under several parallel layouts, each against the same model on
# one rank (which the parity tests compare with PyTorch).
#
#   layouts.sh DSC DSRT PYTHON WORKDIR MODEL LAYOUTS [export flags...]
#
# MODEL is a models/*.py script exported with a dynamic batch; LAYOUTS a
# space-separated list of dp2z1 dp2z3 pp2 tp2 recompute (--recompute layers).
# The reference is one rank
# with micro-batch 4 and gradient accumulation 2 (SGD with momentum,
# clipping 1.0); the data-parallel layouts run micro-batch 4 on each of 2
# ranks without accumulation (the same 8 samples per step, in the same
# order), pp 2 and tp 2 the reference's config. Each run prints compare.py's
# verdict, "OK   LAYOUT: ...". Environment: LAYOUT_STEPS (6),
# LAYOUT_LOSS_RTOL (1e-5), LAYOUT_WEIGHT_ATOL (1e-5).
set -euo pipefail
if [ $# -lt 6 ]; then
  echo "usage: $0 DSC DSRT PYTHON WORKDIR MODEL LAYOUTS [export flags...]" >&2
  exit 2
fi
DSC=$1 DSRT=$2 PY=$3 WORK=$4 MODEL=$5 LAYOUTS=$6
shift 6
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STEPS=${LAYOUT_STEPS:-6}
rm -rf "$WORK"
mkdir -p "$WORK"
"$PY" "$REPO/models/$MODEL.py" "$@" --batch 4 --dynamic-batch -o "$WORK/model.onnx" > /dev/null 2>&1
"$PY" "$HERE/make_data.py" --onnx "$WORK/model.onnx" --samples 64 -o "$WORK/data" > /dev/null 2>&1

config() { # GA DP
  printf '{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": %d, "train_batch_size": %d, "gradient_clipping": 1.0, "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}, "zero_optimization": {"stage3_param_persistence_threshold": 0}}\n' "$1" $((4 * $1 * $2))
}
train() { # NAME CONFIG [dsc flags...]
  local name=$1 cfg=$2
  shift 2
  "$DSC" "$WORK/model.onnx" --config "$cfg" "$@" -o "$WORK/$name.plan"
  "$DSRT" "$WORK/$name.plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --threads 1 \
    --out "$WORK/$name.run" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; return 1; }
}
config 2 1 > "$WORK/ga2.json"
config 1 2 > "$WORK/dp2.json"
train ref "$WORK/ga2.json"
failures=0
for layout in $LAYOUTS; do
  case "$layout" in
    dp2z1) train "$layout" "$WORK/dp2.json" --dp 2 --zero 1 ;;
    dp2z3) train "$layout" "$WORK/dp2.json" --dp 2 --zero 3 ;;
    pp2) train "$layout" "$WORK/ga2.json" --pp 2 ;;
    tp2) train "$layout" "$WORK/ga2.json" --tp 2 ;;
    recompute) train "$layout" "$WORK/ga2.json" --recompute layers ;;
    *) echo "layouts.sh: unknown layout '$layout' (dp2z1 dp2z3 pp2 tp2 recompute)" >&2; exit 2 ;;
  esac
  if out=$("$PY" "$HERE/compare.py" "$WORK/ref.run" "$WORK/$layout.run" \
             --loss-rtol "${LAYOUT_LOSS_RTOL:-1e-5}" --weight-atol "${LAYOUT_WEIGHT_ATOL:-1e-5}" -q 2>&1); then
    echo "OK   $layout: $(echo "$out" | tail -1 | sed 's/^compare: OK: //')"
  else
    echo "FAIL $layout:"
    echo "$out"
    failures=$((failures + 1))
  fi
done
exit $((failures > 0))
