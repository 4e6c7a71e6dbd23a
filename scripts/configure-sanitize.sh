#!/usr/bin/env bash
# Installs the packages of the sanitizer builds (unless DSC_SKIP_INSTALL=1)
# and configures BUILD (default build-asan) with clang-22, ASan+UBSan and the
# libFuzzer harnesses: the one build scripts/fuzz.sh and scripts/sanitize.sh
# share, so CI compiles the project with clang once.
# Usage: scripts/configure-sanitize.sh [BUILD]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-asan}"
[ "${DSC_SKIP_INSTALL:-0}" = 1 ] || "$root/scripts/install-deps.sh" --sanitizers
if [ ! -f "$build/build.ninja" ]; then
  lock=()
  [ -z "${DSC_BUILD_LOCK:-}" ] || lock=(flock "$DSC_BUILD_LOCK")
  "${lock[@]}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DDSC_SANITIZE=address,undefined -DDSC_FUZZ=ON
fi
