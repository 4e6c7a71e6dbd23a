#!/usr/bin/env bash
# Times dsc importing and printing a GPT-2-small-shaped model (12 layers,
# d=768, vocab 50257, seq 1024; 124M parameters) from a TorchScript archive
# (torch.jit.trace, models/gpt.py --format torchscript) and from the ONNX
# export of the same module (same seed, same weights), in one run, best of 3
# each; then each compile to a plan (every weight read and written).
# Usage: bench/torchscript_import.sh [build-dir]   (a dsc built with libtorch)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/models/gpt.py" --size gpt2-small --format torchscript \
  -o "$work/gpt2s.pt" 2> "$work/export.txt"
read -r -a shapes <<< "$(grep -o -- '--input-shape.*' "$work/export.txt")"
/usr/bin/python3 "$root/models/gpt.py" --size gpt2-small -o "$work/gpt2s.onnx" 2> /dev/null
declare -A best rss plan flags
flags[pt]="${shapes[*]}"
flags[onnx]=""
for form in pt onnx; do
  for i in 1 2 3; do
    # shellcheck disable=SC2086
    /usr/bin/time -o "$work/time" -f "%e %M" "$build/bin/dsc" "$work/gpt2s.$form" \
      ${flags[$form]} -o "$work/$form.mlir" 2> /dev/null
    t=$(tail -1 "$work/time")
    s=${t% *}
    echo "dsc import+print of the .$form, run $i: $s s, peak RSS $(( ${t#* } / 1024 )) MiB"
    if [ -z "${best[$form]:-}" ] || awk "BEGIN{exit !($s < ${best[$form]})}"; then
      best[$form]=$s
      rss[$form]=$(( ${t#* } / 1024 ))
    fi
  done
done
for form in pt onnx; do
  # shellcheck disable=SC2086
  /usr/bin/time -o "$work/time" -f "%e %M" "$build/bin/dsc" "$work/gpt2s.$form" \
    ${flags[$form]} -o "$work/plan-$form" 2> /dev/null
  t=$(tail -1 "$work/time")
  plan[$form]=${t% *}
  echo "dsc compile to a plan (weights read and written) of the .$form: ${t% *} s, peak RSS $(( ${t#* } / 1024 )) MiB"
  rm -rf "$work/plan-$form"
done
echo "files: .pt $(( $(stat -c %s "$work/gpt2s.pt") / 1048576 )) MiB, .onnx $(( $(stat -c %s "$work/gpt2s.onnx") / 1048576 )) MiB"
echo "IR: .pt $(grep -c ' nn\.' "$work/pt.mlir") nn ops, .onnx $(grep -c ' nn\.' "$work/onnx.mlir") nn ops"
awk -v p="${best[pt]}" -v o="${best[onnx]}" -v rp="${rss[pt]}" -v ro="${rss[onnx]}" 'BEGIN {
  printf "best: TorchScript %.2f s (%d MiB), ONNX %.2f s (%d MiB): the TorchScript archive imports in %.2fx the ONNX time\n",
         p, rp, o, ro, p / o }'
awk -v p="${plan[pt]}" -v o="${plan[onnx]}" 'BEGIN {
  printf "compile to a plan: TorchScript %.2f s, ONNX %.2f s: %.2fx\n", p, o, p / o }'
