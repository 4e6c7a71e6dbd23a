#!/usr/bin/env bash
# Installs dependencies (unless DSC_SKIP_INSTALL=1), configures and builds dsc.
# Usage: scripts/build.sh [build-dir]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
[ "${DSC_SKIP_INSTALL:-0}" = 1 ] || "$root/scripts/install-deps.sh"
jobs="${DSC_JOBS:-$(nproc)}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" -j "$jobs"
