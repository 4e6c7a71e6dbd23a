#!/usr/bin/env bash
# The README's main command: installs dependencies, builds dsc, exports the
# bundled GPT (PyTorch -> ONNX, with its loss) and shows what dsc makes of it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "$build"
out="$root/runs/main"
mkdir -p "$out"
echo "== exporting the bundled GPT (4 layers, d=128, seq 64) to $out/gpt.onnx"
/usr/bin/python3 "$root/models/gpt.py" --size tiny --layers 4 --d-model 128 --heads 4 \
  --vocab 256 --seq 64 --batch 8 -o "$out/gpt.onnx"
echo "== dsc $out/gpt.onnx --explain"
"$build/bin/dsc" "$out/gpt.onnx" --explain
"$build/bin/dsc" "$out/gpt.onnx" --emit=nn -o "$out/gpt.nn.mlir"
echo "== the imported IR is in $out/gpt.nn.mlir ($(grep -c ' nn\.' "$out/gpt.nn.mlir") nn ops); its first lines:"
head -c 3000 "$out/gpt.nn.mlir" | cut -c1-200 | head -20
