#!/usr/bin/env bash
# Installs every Debian package dsc needs to build, test and benchmark
# (with --sanitizers, also those of the fuzz and sanitizer builds).
# Idempotent: packages already present are skipped by apt; safe to re-run.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libdnnl-dev libopenblas-dev libssl-dev
  libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  liburing-dev libzip-dev libtorch-dev
  openssh-server openssh-client iproute2
  python3-torch python3-torchvision python3-onnx python3-numpy python3-matplotlib
  libtcmalloc-minimal4 libjemalloc2  # PyTorch's allocator in bench/ (bench/common.py)
)
# Only for scripts/fuzz.sh and scripts/sanitize.sh (install-deps.sh
# --sanitizers): clang-22 with its sanitizer and libFuzzer runtimes, and LLVM's
# OpenMP runtime for clang's -fopenmp.
SANITIZER_PACKAGES=(clang-22 libclang-rt-22-dev libfuzzer-22-dev libomp-22-dev)
if [ "${1:-}" = --sanitizers ]; then
  PACKAGES+=("${SANITIZER_PACKAGES[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
