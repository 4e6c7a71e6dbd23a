#!/usr/bin/env bash
# The README's main command: installs dependencies, builds dsc and dsrt, and
# trains the bundled GPT on real text on this machine: byte-level tokens of
# the project's own docs and sources plus /usr/share/common-licenses (on
# every Debian system; nothing is downloaded), on 2 local ranks with ZeRO
# stage 2 (models/configs/gpt-main.json; dsrt starts the ranks).
#   DSC_STEPS   optimizer steps (default 300)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "$build"
out="$root/runs/main"
rm -rf "$out/plan" "$out/run"
mkdir -p "$out"
steps="${DSC_STEPS:-300}"

echo "== tokens: the project's text and /usr/share/common-licenses, byte-level"
/usr/bin/python3 "$root/models/make_tokens.py" -o "$out/data"
echo "== exporting the bundled GPT (4 layers, d=128, 4 heads, seq 64, byte vocabulary)"
/usr/bin/python3 "$root/models/gpt.py" --size tiny --layers 4 --d-model 128 --heads 4 \
  --vocab 256 --seq 64 --batch 8 --dropout 0.1 -o "$out/gpt.onnx"
echo "== dsc: compile for 2 data-parallel ranks with $root/models/configs/gpt-main.json (ZeRO 2)"
"$build/bin/dsc" "$out/gpt.onnx" --config "$root/models/configs/gpt-main.json" --dp 2 \
  -o "$out/plan" --explain | sed -n '/^dsc plan/,$p'
echo "== dsrt: $steps steps on 2 local ranks"
"$build/bin/dsrt" "$out/plan" --data "$out/data/train.bin" --steps "$steps" --out "$out/run"
echo "== the loss curve: $out/run/metrics.csv"
awk -F, 'NR == 2 || (NR > 2 && (NR - 1) % 50 == 0) { printf "  step %4d  loss %.3f\n", $1, $2 }' \
  "$out/run/metrics.csv"
echo "== the curves drawn (loss, lr, gradient norm): tools/plot/plot_run.py"
/usr/bin/python3 "$root/tools/plot/plot_run.py" "$out/run" --png --title "dsc main job: bundled GPT, 2 ranks, ZeRO 2"
