#!/usr/bin/env bash
# One optimizer config trained by dsc + dsrt under several layouts, each
# against the PyTorch reference of DeepSpeed's update rule (reference_train.py,
# ds_optimizers.py).
#
#   optimizer-parity.sh DSC DSRT PYTHON WORKDIR CONFIG LAYOUTS [export flags...]
#
# CONFIG is a ds_config with micro-batch 4 and gradient accumulation 2 on one
# rank; LAYOUTS a space-separated list of
#   1      the config as it is, one rank
#   dp2zS  2 data-parallel ranks with ZeRO stage S (0-3), micro-batch 4 and
#          no accumulation: the same 8 samples per step, in the same order
#   tp2    tensor parallelism 2, the config as it is
#   dp2zStp2  both (4 ranks)
#   pp2    2 pipeline stages, the config as it is
# The model is models/gpt.py (dropout 0) with the export flags given. Each
# run prints compare.py's verdict, "OK   LAYOUT: ...". Environment:
# OPT_STEPS (20), OPT_LOSS_RTOL (1e-6), OPT_WEIGHT_ATOL (1e-6).
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
"$PY" "$HERE/make_data.py" --onnx "$WORK/model.onnx" --samples 64 -o "$WORK/data" > /dev/null 2>&1
"$PY" "$HERE/reference_train.py" --onnx "$WORK/model.onnx" --config "$CONFIG" \
  --data "$WORK/data" --steps "$STEPS" --out "$WORK/torch" --self-check > "$WORK/torch.log" 2>&1 ||
  { cat "$WORK/torch.log"; exit 1; }
# The data-parallel config: micro-batch 4 on each of 2 ranks, no accumulation.
"$PY" - "$CONFIG" "$WORK/dp2.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["train_micro_batch_size_per_gpu"] == 4 and c["gradient_accumulation_steps"] == 2, c
c["gradient_accumulation_steps"] = 1
c["train_batch_size"] = 8
c.setdefault("zero_optimization", {})["stage3_param_persistence_threshold"] = 0
json.dump(c, open(sys.argv[2], "w"))
PYEOF
failures=0
for layout in $LAYOUTS; do
  case "$layout" in
    1) flags=(--config "$CONFIG") ;;
    dp2z[0-3]) flags=(--config "$WORK/dp2.json" --dp 2 --zero "${layout#dp2z}") ;;
    dp2z[0-3]tp2) z=${layout#dp2z}; flags=(--config "$WORK/dp2.json" --dp 2 --zero "${z%tp2}" --tp 2) ;;
    tp2) flags=(--config "$CONFIG" --tp 2) ;;
    pp2) flags=(--config "$CONFIG" --pp 2) ;;
    *) echo "optimizer-parity.sh: unknown layout '$layout' (1 dp2z0-3 tp2 dp2z0-3tp2 pp2)" >&2; exit 2 ;;
  esac
  if ! { "$DSC" "$WORK/model.onnx" "${flags[@]}" -o "$WORK/$layout.plan" &&
         "$DSRT" "$WORK/$layout.plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --threads 1 \
           --out "$WORK/$layout.run"; } > "$WORK/$layout.log" 2>&1; then
    echo "FAIL $layout: training failed"
    cat "$WORK/$layout.log"
    failures=$((failures + 1))
    continue
  fi
  if out=$("$PY" "$HERE/compare.py" "$WORK/$layout.run" "$WORK/torch" \
             --loss-rtol "${OPT_LOSS_RTOL:-1e-6}" --weight-atol "${OPT_WEIGHT_ATOL:-1e-6}" -q 2>&1); then
    echo "OK   $layout: $(echo "$out" | tail -1 | sed 's/^compare: OK: //')"
  else
    echo "FAIL $layout:"
    echo "$out"
    failures=$((failures + 1))
  fi
done
exit $((failures > 0))
