#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "$build"
cd "$build"
ctest --output-on-failure -j "${DSC_JOBS:-$(nproc)}"
