#!/usr/bin/env bash
# The README's main command: installs dependencies, builds dsc and dsrt, and
# trains the bundled GPT on real text on this machine: byte-level tokens of
# the project's own docs and sources plus /usr/share/common-licenses (on
# every Debian system; nothing is downloaded), on 2 local ranks with ZeRO
# stage 2 (models/configs/gpt-main.json; dsrt starts the ranks).
# Every 200 steps and at the end it evaluates on the held-out val.bin and
# compares that validation loss with what counting bytes gives on it.
#   DSC_STEPS   optimizer steps (default 2400, about a minute of training)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "$build"
out="$root/runs/main"
rm -rf "$out/plan" "$out/run"
mkdir -p "$out"
steps="${DSC_STEPS:-2400}"

echo "== tokens: the project's text and /usr/share/common-licenses, byte-level"
/usr/bin/python3 "$root/models/make_tokens.py" -o "$out/data"
echo "== exporting the bundled GPT (4 layers, d=128, 4 heads, seq 64, byte vocabulary)"
/usr/bin/python3 "$root/models/gpt.py" --size tiny --layers 4 --d-model 128 --heads 4 \
  --vocab 256 --seq 64 --batch 8 --dropout 0.1 -o "$out/gpt.onnx"
echo "== dsc: compile for 2 data-parallel ranks with $root/models/configs/gpt-main.json (ZeRO 2)"
"$build/bin/dsc" "$out/gpt.onnx" --config "$root/models/configs/gpt-main.json" --dp 2 \
  -o "$out/plan" --explain | sed -n '/^dsc plan/,$p'
echo "== what counting bytes gives on the held-out text (models/token_baselines.py)"
/usr/bin/python3 "$root/models/token_baselines.py" "$out/data"
baselines=$(/usr/bin/python3 "$root/models/token_baselines.py" "$out/data" --json)
echo "== dsrt: $steps steps on 2 local ranks, the validation loss every 200 steps (64 batches of val.bin)"
"$build/bin/dsrt" "$out/plan" --data "$out/data/train.bin" --steps "$steps" --out "$out/run" \
  --eval-data "$out/data/val.bin" --eval-interval 200 --eval-batches 64 --timeline
echo "== the curves: $out/run/metrics.csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "eval_loss") e = i }
         NR > 1 && $e != "" { printf "  step %5d  loss %.3f  validation loss %.3f\n", $1, $2, $e }' \
  "$out/run/metrics.csv"
/usr/bin/python3 - "$out/run/metrics.csv" "$baselines" <<'PY'
import csv, json, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("eval_loss")]
b = json.loads(sys.argv[2])
v = float(rows[-1]["eval_loss"])
print("== after %s steps the validation loss is %.3f nats/byte: byte frequencies alone give "
      "%.3f, the previous byte %.3f (%s)" % (rows[-1]["step"], v, b["unigram"], b["bigram"],
      "below both" if v < b["bigram"] else "below byte frequencies" if v < b["unigram"]
      else "NOT below byte frequencies: the model has not learned"))
sys.exit(0 if v < b["unigram"] else 1)
PY
echo "== the curves drawn (loss, lr, gradient norm): tools/plot/plot_run.py"
/usr/bin/python3 "$root/tools/plot/plot_run.py" "$out/run" --png --title "dsc main job: bundled GPT, 2 ranks, ZeRO 2, validation every 200 steps"
echo "== each rank's memory over the last step against the plan: tools/plot/plot_memory.py"
/usr/bin/python3 "$root/tools/plot/plot_memory.py" "$out/run" --png --title "dsc main job: memory over the last step, 2 ranks, ZeRO 2"
