#!/bin/bash
# Prepares, on this (Debian) machine, what the GPU machine needs to run
# dsrt's CUDA checks: that machine has CUDA 13, cuBLAS, NCCL and PyTorch but
# no Debian -dev packages and no network. Writes .gpu/ (ignored by git):
#   bin/       dsrt, the CUDA kernel gtests and the row-kernel bench, built
#              here with nvcc (sm_90)
#   libs.tar.xz  the Debian shared libraries they load that a CUDA image
#              lacks (oneDNN, OpenBLAS, protobuf, OpenMPI's libmpi, ...);
#              libc, libstdc++ and the CUDA libraries come from that machine
#   tiny/      the bundled tiny GPT's plan and a token file (parity run)
#   gpt2/, gpt2-bf16/  GPT-2 small's fp32 and bf16 plans without their
#              weights (bench/gpu_gpt.py writes PyTorch's initial ones
#              there), and the weights' names and shapes
# Then scripts/gpu/check.sh runs there (one call of the device tool):
#   run(command="scripts/gpu/check.sh", carry=[".gpu"])
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DSC_BUILD_DIR:-$root/build}
out=$root/.gpu
py=/usr/bin/python3
cmake --build "$build" -j2 --target dsrt dsc dsrt_cuda_kernels_test dsrt_kernels_test \
  dsrt_cuda_row_bench
rm -rf "$out"
mkdir -p "$out/bin" "$out/tiny" "$out/gpt2" "$out/lib"
cp "$build/bin/dsrt" "$build/bin/dsrt_cuda_kernels_test" "$build/bin/dsrt_kernels_test" \
  "$build/bin/dsrt_cuda_row_bench" "$out/bin/"
# Every library the binaries load, but the C library, libstdc++/libgcc and
# CUDA's (the GPU machine's own match its driver).
ldd "$out"/bin/* | awk '/=>/ {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
tar -C "$out" -cJf "$out/libs.tar.xz" lib
rm -rf "$out/lib"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A small byte-level GPT with dropout (the CUDA dropout draws the CPU's
# masks) and a token file of this repository's README and docs.
$py "$root/models/gpt.py" --size tiny --batch 8 --seq 64 --vocab 256 --layers 2 -o "$work/tiny.onnx" >/dev/null
"$build/bin/dsc" "$work/tiny.onnx" -o "$out/tiny/plan" >/dev/null
"$build/bin/dsc" "$work/tiny.onnx" --precision bf16 -o "$out/tiny/plan-bf16" >/dev/null
"$build/bin/dsc" "$work/tiny.onnx" --precision fp16 -o "$out/tiny/plan-fp16" >/dev/null
$py "$root/models/make_tokens.py" -o "$work/tokens" "$root/README.md" "$root/docs" >/dev/null
cp "$work/tokens/train.bin" "$out/tiny/tokens.bin"
# GPT-2 small (124M), fp32, batch 8 x 1024, no dropout: the plan only.
$py "$root/models/gpt.py" --size gpt2-small --batch 8 --dropout 0 -o "$work/gpt2.onnx" >/dev/null
"$build/bin/dsc" "$work/gpt2.onnx" -o "$work/gpt2plan" >/dev/null
cp "$work/gpt2plan/plan.pb" "$work/gpt2plan/plan.sha256" "$work/gpt2plan/manifest.txt" "$out/gpt2/"
"$build/bin/dsc" "$work/gpt2.onnx" --precision bf16 -o "$work/gpt2bf16" >/dev/null
mkdir -p "$out/gpt2-bf16"
cp "$work/gpt2bf16/plan.pb" "$work/gpt2bf16/plan.sha256" "$work/gpt2bf16/manifest.txt" "$out/gpt2-bf16/"
$py - "$work/gpt2plan/weights.safetensors" "$out/gpt2/weights.json" <<'PY'
import sys, json, struct
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    header = json.loads(f.read(n))
header.pop('__metadata__', None)
json.dump({k: {'dtype': v['dtype'], 'shape': v['shape']} for k, v in header.items()},
          open(sys.argv[2], 'w'), indent=1, sort_keys=True)
PY
cp "$out/gpt2/weights.json" "$out/gpt2-bf16/"
du -sh "$out"/* | sed "s|$root/||"
