#!/usr/bin/env bash
# Times dsc importing and printing a GPT-2-small-shaped model (12 layers,
# d=768, vocab 50257, seq 1024; 124M parameters) from a torch.export archive
# (.pt2) and from the legacy exporter's ONNX, in one run, best of 3 each.
# The .pt2 is written by bench/make_pt2_gpt.py (this machine's PyTorch 1.13
# has no torch.export) with the ATen calls PyTorch 2.11 records for the
# shared GPT; the ONNX by models/gpt.py. Both hold the same architecture and
# weights of the same shapes (the values differ).
# Usage: bench/pt2_import.sh [build-dir]   (needs a built dsc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/bench/make_pt2_gpt.py" "$work/gpt2s.pt2"
/usr/bin/python3 "$root/models/gpt.py" --size gpt2-small -o "$work/gpt2s.onnx" > /dev/null
declare -A best rss plan
for form in pt2 onnx; do
  for i in 1 2 3; do
    /usr/bin/time -o "$work/time" -f "%e %M" "$build/bin/dsc" "$work/gpt2s.$form" \
      -o "$work/$form.mlir" 2> /dev/null
    t=$(tail -1 "$work/time")
    s=${t% *}
    echo "dsc import+print of the .$form, run $i: $s s, peak RSS $(( ${t#* } / 1024 )) MiB"
    if [ -z "${best[$form]:-}" ] || awk "BEGIN{exit !($s < ${best[$form]})}"; then
      best[$form]=$s
      rss[$form]=$(( ${t#* } / 1024 ))
    fi
  done
done
# The whole compile reads every weight (into the plan's safetensors): the
# like-for-like cost of the two readers.
for form in pt2 onnx; do
  /usr/bin/time -o "$work/time" -f "%e %M" "$build/bin/dsc" "$work/gpt2s.$form" \
    -o "$work/plan-$form" 2> /dev/null
  t=$(tail -1 "$work/time")
  plan[$form]=${t% *}
  echo "dsc compile to a plan (weights read and written) of the .$form: ${t% *} s, peak RSS $(( ${t#* } / 1024 )) MiB"
  rm -rf "$work/plan-$form"
done
echo "files: .pt2 $(( $(stat -c %s "$work/gpt2s.pt2") / 1048576 )) MiB, .onnx $(( $(stat -c %s "$work/gpt2s.onnx") / 1048576 )) MiB"
echo "IR: .pt2 $(grep -c ' nn\.' "$work/pt2.mlir") nn ops, .onnx $(grep -c ' nn\.' "$work/onnx.mlir") nn ops"
awk -v p="${best[pt2]}" -v o="${best[onnx]}" -v rp="${rss[pt2]}" -v ro="${rss[onnx]}" 'BEGIN {
  printf "best: .pt2 %.2f s (%d MiB), .onnx %.2f s (%d MiB): the .pt2 imports in %.2fx the ONNX time\n",
         p, rp, o, ro, p / o }'
awk -v p="${plan[pt2]}" -v o="${plan[onnx]}" 'BEGIN {
  printf "compile to a plan: .pt2 %.2f s, .onnx %.2f s: %.2fx\n", p, o, p / o }'
