#!/bin/bash
# The GPU checks of dsrt's CUDA backend, in one call on the GPU machine
# (after scripts/gpu/bundle.sh here):
#   run(command="scripts/gpu/check.sh", carry=[".gpu"], timeout_s=540)
# Writes check.log (everything), and the benches' gpu_gpt*.md, to $OUT (or
# .gpu/out). Each step prints "check: NAME: PASS|FAIL (seconds)"; the exit
# status is the number of failed steps. DSRT_CHECK_SKIP_BENCH=1 leaves the
# benches out (a shorter call); DSRT_CHECK_ONLY="NAME ..." runs only the
# steps named (a step's name or its prefix before the first '-').
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
g=$root/.gpu
out=${OUT:-$g/out}
mkdir -p "$out"
exec > >(tee "$out/check.log") 2>&1
export PYTHONUNBUFFERED=1
failed=0
step() { # step NAME TIMEOUT CMD...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  if [ -n "${DSRT_CHECK_ONLY:-}" ] && ! [[ " $DSRT_CHECK_ONLY " == *" $name "* ||
    " $DSRT_CHECK_ONLY " == *" ${name%%-*} "* ]]; then
    return 0
  fi
  echo "=== $name: $*"
  if timeout "$limit" "$@"; then
    echo "check: $name: PASS ($((SECONDS - t0)) s)"
  else
    echo "check: $name: FAIL, status $? ($((SECONDS - t0)) s)"
    failed=$((failed + 1))
  fi
}

# The Debian libraries dsrt loads; CUDA's own from this machine.
mkdir -p /tmp/dsrt && tar -C /tmp/dsrt -xJf "$g/libs.tar.xz"
cudalibs=
for l in libcublas.so.13 libcublasLt.so.13; do
  f=$(find /usr/local/cuda*/ /usr/lib /opt -name "$l" 2>/dev/null | head -1)
  [ -n "$f" ] && cudalibs=$cudalibs:$(dirname "$f")
done
export LD_LIBRARY_PATH=/tmp/dsrt/lib$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd "$g/bin/dsrt" | grep -E "not found|cublas" || true
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
dsrt=$g/bin/dsrt
run=$out/runs
mkdir -p "$run"

step kernel-gtests 120 "$g/bin/dsrt_cuda_kernels_test"
# fp32 parity: the same plan, data and seed on the CPU and on the GPU.
step parity-cpu 120 "$dsrt" "$g/tiny/plan" --device cpu --data "$g/tiny/tokens.bin" \
  --steps 200 --out "$run/cpu"
step parity-gpu 120 "$dsrt" "$g/tiny/plan" --device cuda --data "$g/tiny/tokens.bin" \
  --steps 200 --out "$run/gpu"
step parity-compare 30 python3 "$root/scripts/gpu/parity.py" "$run/cpu/metrics.csv" \
  "$run/gpu/metrics.csv" --loss-rtol 1e-5 --steps 50
# The weights after 200 steps, GPU against CPU.
step parity-weights 30 python3 - "$run/cpu/weights.safetensors" "$run/gpu/weights.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
import numpy as np
worst = max(float(np.max(np.abs(a[k] - b[k])) / (np.max(np.abs(a[k])) + 1e-30)) for k in a)
print(f"largest weight difference after 200 steps, relative to each tensor's largest: {worst:.2e}")
sys.exit(0 if set(a) == set(b) else 1)
PY
# bf16 on both: the same masks and weights, each rounding its own GEMM
# sums; the losses of the first 50 steps within 1e-3 relative (measured on
# an H100: 4.3e-5).
step parity-bf16-cpu 120 "$dsrt" "$g/tiny/plan-bf16" --device cpu --data "$g/tiny/tokens.bin" \
  --steps 200 --out "$run/cpu-bf16"
step parity-bf16-gpu 120 "$dsrt" "$g/tiny/plan-bf16" --device cuda --data "$g/tiny/tokens.bin" \
  --steps 200 --out "$run/gpu-bf16"
step parity-bf16-compare 30 python3 "$root/scripts/gpu/parity.py" "$run/cpu-bf16/metrics.csv" \
  "$run/gpu-bf16/metrics.csv" --loss-rtol 1e-3 --steps 50
if [ "${DSRT_CHECK_SKIP_BENCH:-0}" != 1 ]; then
# The softmax kernels against a device copy's bandwidth, and, where Nsight
# Compute is installed, its reading of the fused softmax.
step bench-rows 60 "$g/bin/dsrt_cuda_row_bench"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$ncu" ]; then
  step bench-rows-ncu 120 "$ncu" --section SpeedOfLight --section Occupancy \
    -k regex:softmax --launch-count 2 "$g/bin/dsrt_cuda_row_bench"
fi
# cuBLAS on the vocabulary head's rows of 50257 bf16 elements, aligned or not.
step bench-gemm-align 60 python3 "$root/bench/gpu_gemm_align.py"
# bf16 first (the goal of issue 28), with what the newest changes buy
# (dsrt again without the 16-byte and warp-per-row paths, and without the
# cross-entropy's cast fusion; the head's padding: DSRT_CUDA_GEMM_PAD=0 or
# 8), and where torch.compile's GPU time goes (torch.profiler, 2 steps).
step bench-gpt2-bf16 300 python3 "$root/bench/gpu_gpt.py" --plan "$g/gpt2-bf16" --dsrt "$dsrt" \
  --precision bf16 --out "$out/bench-bf16" --torch-profile 2 \
  --dsrt-variant DSRT_CUDA_VECTOR=0 --dsrt-variant DSRT_CUDA_FUSE=softmax \
  --dsrt-variant DSRT_CUDA_FUSE=0
# Where GPT-2's step goes on the GPU (the bench wrote the plan's weights):
# CUDA events around each instruction, the first step left out.
step profile-gpt2-bf16 120 "$dsrt" "$g/gpt2-bf16" --device cuda --steps 6 --profile \
  --out "$run/profile"
fi
# compute-sanitizer: the kernels, then short runs of the tiny GPT.
step kernel-memcheck 240 "$sanitizer" --tool memcheck --error-exitcode 9 --leak-check full \
  "$g/bin/dsrt_cuda_kernels_test"
step e2e-memcheck-bf16 240 "$sanitizer" --tool memcheck --error-exitcode 9 "$dsrt" \
  "$g/tiny/plan-bf16" --device cuda --data "$g/tiny/tokens.bin" --steps 3 --out "$run/memcheck-bf16"
step e2e-memcheck 240 "$sanitizer" --tool memcheck --error-exitcode 9 "$dsrt" "$g/tiny/plan" \
  --device cuda --data "$g/tiny/tokens.bin" --steps 3 --out "$run/memcheck"
# Checkpoints from the device: a run saving at steps 10 and 20 (and its
# ONNX export), resumed from step 10 on the GPU and on the CPU; the resumed
# steps must repeat the first run's (GPU: within 1e-6 relative, the atomics
# of the embedding gradient and the norm add in no fixed order; CPU: 1e-5).
tok=$g/tiny/tokens.bin
step ckpt-save 60 "$dsrt" "$g/tiny/plan" --device cuda --data "$tok" --steps 20 \
  --save-dir "$run/ck" --save-interval 10 --export-onnx "$run/ckA.onnx" --out "$run/ckA"
step ckpt-resume-gpu 60 "$dsrt" "$g/tiny/plan" --device cuda --data "$tok" --steps 20 \
  --resume "$run/ck/step-00000010" --out "$run/ckB"
step ckpt-resume-cpu 60 "$dsrt" "$g/tiny/plan" --device cpu --data "$tok" --steps 20 \
  --resume "$run/ck/step-00000010" --out "$run/ckC"
step ckpt-compare 60 python3 - "$run" <<'PY'
import csv, sys, onnx
run = sys.argv[1]
rows = lambda r: {int(x["step"]): float(x["loss"]) for x in csv.DictReader(open(f"{run}/{r}/metrics.csv"))}
a, b, c = rows("ckA"), rows("ckB"), rows("ckC")
ok = True
for name, other, tol in (("GPU", b, 1e-6), ("CPU", c, 1e-5)):
    steps = sorted(s for s in other if s > 10)
    worst = max(abs(other[s] - a[s]) / abs(a[s]) for s in steps)
    print(f"resumed on the {name}: steps {steps[0]}..{steps[-1]}, largest relative loss difference {worst:.2e} (bound {tol:g})")
    ok &= steps == list(range(11, 21)) and worst <= tol
m = onnx.load(f"{run}/ckA.onnx")
onnx.checker.check_model(m)
print(f"export: {len(m.graph.initializer)} initializers, checker passed")
sys.exit(0 if ok else 1)
PY
# A plan the device cannot run yet (fp16) runs on the CPU under auto, saying why.
step fp16-auto-cpu 60 bash -c "'$dsrt' '$g/tiny/plan-fp16' --steps 2 --out '$run/fp16' > '$run/fp16.txt' 2>&1; cat '$run/fp16.txt'; grep -q 'note: running on the CPU, not the GPU: .*F16' '$run/fp16.txt' && grep -q ' threads, arena' '$run/fp16.txt'"
# --device auto takes the GPU; --profile times each op kind on it.
step auto-device 60 bash -c "'$dsrt' '$g/tiny/plan' --steps 20 --profile --out '$run/auto' | tee '$run/auto.txt' && grep -q 'on NVIDIA' '$run/auto.txt'"
if [ "${DSRT_CHECK_SKIP_BENCH:-0}" != 1 ]; then
step bench-gpt2 200 python3 "$root/bench/gpu_gpt.py" --plan "$g/gpt2" --dsrt "$dsrt" \
  --out "$out/bench"
fi
cp "$out"/bench/gpu_gpt.md "$out/gpu_gpt.md" 2>/dev/null
cp "$out"/bench-bf16/gpu_gpt.md "$out/gpu_gpt_bf16.md" 2>/dev/null
rm -rf "$out/bench" "$out/bench-bf16" "$run"
echo "check: $failed step(s) failed"
exit $failed
