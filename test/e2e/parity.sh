#!/usr/bin/env bash
# End-to-end parity: dsc + dsrt against the PyTorch reference.
#
#   parity.sh DSC DSRT PYTHON WORKDIR MODEL CONFIG_JSON [export flags...]
#
# MODEL is mlp, gpt, bert or llama (models/MODEL.py); PYTHON has torch and onnx
# (/usr/bin/python3). WORKDIR is emptied and receives
#   model.onnx(.json)  the export (--dropout 0 for gpt/bert/llama, --batch = the
#                      config's micro batch)
#   data/              make_data.py output (PARITY_SAMPLES samples, default 64)
#   plan/              dsc MODEL --config CONFIG -o plan
#   dsrt/ torch/       metrics.csv + weights.safetensors of each run
# and compare.py decides; its last line states what it compared, the bounds
# and the measured maxima ("compare: OK: 20 steps, loss rel diff max ... <=
# rtol ...; N tensors, weight abs diff max ... <= atol ..."), which the tests
# FileCheck. Environment: PARITY_STEPS (20), PARITY_SAMPLES (64),
# PARITY_LOSS_RTOL (1e-5) and PARITY_WEIGHT_ATOL (1e-5; float32 runs record
# about 1e-7 for both, and each test sets its own, ~100x what it records),
# PARITY_FORMAT (onnx; torchscript: dsc imports the same module traced with
# --format torchscript), PARITY_JIT (trace; script: with PARITY_FORMAT=
# torchscript, the module compiled by torch.jit.script), PARITY_DSC_FLAGS (more dsc flags, e.g. --tp 2),
# PARITY_PRECISION (fp32; bf16: dsc --precision bf16 and reference_train.py
# --precision bf16, which makes dsc's casts, with --fused-attention and
# --fused-epilogue where the plan's manifest says dsc fused them), PARITY_REFERENCE (float32; float64:
# the reference trains in float64, for models whose training amplifies
# float32 rounding faster than the steps compared), and compare.py's optional checks
# PARITY_LOSS_MEAN_RTOL and PARITY_GRAD_RTOL (unset: not checked).
set -euo pipefail

if [ $# -lt 6 ]; then
  echo "usage: $0 DSC DSRT PYTHON WORKDIR MODEL CONFIG_JSON [export flags...]" >&2
  exit 2
fi
DSC=$1 DSRT=$2 PY=$3 WORK=$4 MODEL=$5 CONFIG=$6
shift 6

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STEPS=${PARITY_STEPS:-20}
SAMPLES=${PARITY_SAMPLES:-64}
PRECISION=${PARITY_PRECISION:-fp32}
precision=()
case "$PRECISION" in
  fp32) ;;
  bf16) precision=(--precision bf16) ;;
  *) echo "parity.sh: PARITY_PRECISION must be fp32 or bf16, not '$PRECISION'" >&2; exit 2 ;;
esac
reference=()
case "${PARITY_REFERENCE:-float32}" in
  float32) ;;
  float64) reference=(--float64) ;;
  *) echo "parity.sh: PARITY_REFERENCE must be float32 or float64" >&2; exit 2 ;;
esac
checks=()
if [ -n "${PARITY_LOSS_MEAN_RTOL:-}" ]; then
  checks+=(--loss-mean-rtol "$PARITY_LOSS_MEAN_RTOL")
fi
if [ -n "${PARITY_GRAD_RTOL:-}" ]; then
  checks+=(--grad-rtol "$PARITY_GRAD_RTOL")
fi

rm -rf "$WORK"
mkdir -p "$WORK"

MB=$("$PY" "$HERE/reference_train.py" --config "$CONFIG" --print-micro-batch)
forced=(--batch "$MB")
case "$MODEL" in
  gpt|bert|llama|classifier) forced+=(--dropout 0) ;;
  mlp|zoo) ;;
  *) echo "parity.sh: unknown model '$MODEL' (mlp, gpt, bert, llama, classifier, zoo)" >&2; exit 2 ;;
esac

echo "== export models/$MODEL.py $* ${forced[*]}"
"$PY" "$REPO/models/$MODEL.py" "$@" "${forced[@]}" -o "$WORK/model.onnx"

echo "== make_data ($SAMPLES samples)"
"$PY" "$HERE/make_data.py" --onnx "$WORK/model.onnx" --samples "$SAMPLES" -o "$WORK/data"

model="$WORK/model.onnx"
shapes=()
if [ "${PARITY_FORMAT:-onnx}" = torchscript ]; then
  # The same module (same seed, same flags) as a torch.jit archive,
  # which dsc imports with the --input-shape flags its export prints; the
  # reference still trains from the ONNX file's weights, the same ones.
  echo "== export models/$MODEL.py $* ${forced[*]} --format torchscript --jit ${PARITY_JIT:-trace}"
  "$PY" "$REPO/models/$MODEL.py" "$@" "${forced[@]}" --format torchscript \
    --jit "${PARITY_JIT:-trace}" -o "$WORK/model.pt" 2> "$WORK/torchscript-export.txt"
  read -r -a shapes <<< "$(grep -o -- '--input-shape.*' "$WORK/torchscript-export.txt")"
  model="$WORK/model.pt"
fi

echo "== dsc compile ($PRECISION)"
"$DSC" "$model" ${shapes[@]+"${shapes[@]}"} --config "$CONFIG" \
  ${precision[@]+"${precision[@]}"} ${PARITY_DSC_FLAGS:-} -o "$WORK/plan"

echo "== dsrt train $STEPS steps"
"$DSRT" "$WORK/plan" --data "$WORK/data" --steps "$STEPS" --seed 0 --out "$WORK/dsrt"

# A bf16 plan whose attention dsc fused (the manifest's fusion line) rounds
# as the fused op does; the reference follows (reference_train.py
# --fused-attention).
fused=()
if [ "$PRECISION" = bf16 ] && grep -q '^fusion: .* attention ops' "$WORK/plan/manifest.txt"; then
  fused=(--fused-attention)
fi
# Likewise a bf16 plan with GEMM epilogues (--fused-epilogue).
if [ "$PRECISION" = bf16 ] && grep -q '^fusion: .*GEMM epilogues' "$WORK/plan/manifest.txt"; then
  fused+=(--fused-epilogue)
fi

echo "== reference train $STEPS steps ($PRECISION${fused[@]+ ${fused[*]}})"
"$PY" "$HERE/reference_train.py" --onnx "$WORK/model.onnx" --config "$CONFIG" \
  --data "$WORK/data" --steps "$STEPS" --out "$WORK/torch" --self-check \
  ${precision[@]+"${precision[@]}"} ${reference[@]+"${reference[@]}"} ${fused[@]+"${fused[@]}"}

echo "== compare dsrt with the reference: $STEPS steps' losses, the final weights"
"$PY" "$HERE/compare.py" "$WORK/dsrt" "$WORK/torch" \
  --loss-rtol "${PARITY_LOSS_RTOL:-1e-5}" --weight-atol "${PARITY_WEIGHT_ATOL:-1e-5}" \
  ${checks[@]+"${checks[@]}"}
