#!/usr/bin/env bash
# Times dsc importing and printing the GPT-2-small-shaped export (12 layers,
# d=768, vocab 50257, seq 1024; 124M parameters, ~510 MB) and, for scale,
# how long PyTorch takes to load the same ONNX file with onnx.load.
# Usage: bench/import_time.sh [build-dir]   (needs a built dsc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/models/gpt.py" --size gpt2-small -o "$work/gpt2s.onnx"
best=""
for i in 1 2 3; do
  t=$( { /usr/bin/time -f "%e %M" "$build/bin/dsc" "$work/gpt2s.onnx" -o "$work/gpt2s.mlir"; } 2>&1 | tail -1)
  echo "dsc import+print run $i: ${t% *} s, peak RSS $(( ${t#* } / 1024 )) MiB"
  s=${t% *}
  if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s; fi
done
load=$(/usr/bin/python3 -c "
import time, onnx
t = time.time(); onnx.load('$work/gpt2s.onnx'); print(f'{time.time()-t:.2f}')")
echo "onnx.load (Python) of the same file: $load s"
echo "best dsc: $best s; IR: $(wc -c < "$work/gpt2s.mlir") bytes, $(grep -c ' nn\.' "$work/gpt2s.mlir") nn ops"
