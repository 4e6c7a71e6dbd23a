#!/usr/bin/env bash
# Times dsc importing and printing a GPT-2-small-shaped model (12 layers,
# d=768, vocab 50257, seq 1024; 124M parameters) from a PyTorch 2.x form and
# from the legacy exporter's ONNX, in one run, best of 3 each; then each
# compile to a plan (every weight read and written), the like-for-like cost.
#   pt2:         a torch.export archive written by bench/make_pt2_gpt.py (this
#                machine's PyTorch 1.13 has no torch.export) with the ATen calls
#                PyTorch 2.11 records for the shared GPT; the same architecture
#                and weight shapes as models/gpt.py's (the values differ)
#   torchscript: models/gpt.py --format torchscript (torch.jit.trace; with
#                --jit script, torch.jit.script), the same module and weights
#                as the ONNX (a dsc built with libtorch)
# Usage: bench/import_vs_onnx.sh pt2|torchscript [--jit script] [build-dir]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
format="${1:?usage: $0 pt2|torchscript [--jit script] [build-dir]}"
shift
jit=trace
if [ "${1:-}" = --jit ]; then
  jit="${2:?--jit takes trace or script}"
  shift 2
fi
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=()
case "$format" in
  pt2)
    ext=pt2 label=".pt2"
    /usr/bin/python3 "$root/bench/make_pt2_gpt.py" "$work/gpt2s.pt2" ;;
  torchscript)
    ext=pt label="TorchScript ($jit)"
    /usr/bin/python3 "$root/models/gpt.py" --size gpt2-small --format torchscript --jit "$jit" \
      -o "$work/gpt2s.pt" 2> "$work/export.txt"
    read -r -a flags <<< "$(grep -o -- '--input-shape.*' "$work/export.txt")" ;;
  *) echo "$0: format '$format' is not pt2 or torchscript" >&2; exit 2 ;;
esac
/usr/bin/python3 "$root/models/gpt.py" --size gpt2-small -o "$work/gpt2s.onnx" > /dev/null 2>&1

# run FORM OUT: dsc on gpt2s.FORM to OUT; prints "SECONDS RSS_MIB".
run() {
  local form=$1 out=$2 args=()
  [ "$form" = onnx ] || args=(${flags[@]+"${flags[@]}"})
  /usr/bin/time -o "$work/time" -f "%e %M" "$build/bin/dsc" "$work/gpt2s.$form" \
    ${args[@]+"${args[@]}"} -o "$out" 2> /dev/null
  local t
  t=$(tail -1 "$work/time")
  echo "${t% *} $(( ${t#* } / 1024 ))"
}
declare -A best rss plan
for form in "$ext" onnx; do
  for i in 1 2 3; do
    read -r s m <<< "$(run "$form" "$work/$form.mlir")"
    echo "dsc import+print of the .$form, run $i: $s s, peak RSS $m MiB"
    if [ -z "${best[$form]:-}" ] || awk "BEGIN{exit !($s < ${best[$form]})}"; then
      best[$form]=$s
      rss[$form]=$m
    fi
  done
done
for form in "$ext" onnx; do
  read -r s m <<< "$(run "$form" "$work/plan-$form")"
  plan[$form]=$s
  echo "dsc compile to a plan (weights read and written) of the .$form: $s s, peak RSS $m MiB"
  rm -rf "$work/plan-$form"
done
echo "files: .$ext $(( $(stat -c %s "$work/gpt2s.$ext") / 1048576 )) MiB, .onnx $(( $(stat -c %s "$work/gpt2s.onnx") / 1048576 )) MiB"
echo "IR: .$ext $(grep -c ' nn\.' "$work/$ext.mlir") nn ops, .onnx $(grep -c ' nn\.' "$work/onnx.mlir") nn ops"
awk -v l="$label" -v p="${best[$ext]}" -v o="${best[onnx]}" -v rp="${rss[$ext]}" -v ro="${rss[onnx]}" 'BEGIN {
  printf "best: %s %.2f s (%d MiB), ONNX %.2f s (%d MiB): %.2fx the ONNX import time\n",
         l, p, rp, o, ro, p / o }'
awk -v l="$label" -v p="${plan[$ext]}" -v o="${plan[onnx]}" 'BEGIN {
  printf "compile to a plan: %s %.2f s, ONNX %.2f s: %.2fx\n", l, p, o, p / o }'
