#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test,
# then the fuzz harnesses' short runs over their committed corpora
# (scripts/fuzz.sh --smoke: a clang-22 ASan+UBSan build of what they test,
# in build-asan). DSC_SKIP_FUZZ=1 leaves those out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "$build"
cd "$build"
status=0
ctest --output-on-failure -j "${DSC_JOBS:-$(nproc)}" || status=$?

if [ "${DSC_SKIP_FUZZ:-0}" = 1 ]; then
  echo "== fuzz smoke: SKIPPED (DSC_SKIP_FUZZ=1)"
elif { [ "${DSC_SKIP_INSTALL:-0}" = 1 ] || "$root/scripts/install-deps.sh" --sanitizers; } &&
     command -v clang++-22 >/dev/null &&
     ls /usr/lib/llvm-22/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "== fuzz smoke: every harness briefly over its corpus (docs/fuzzing.md)"
  DSC_SKIP_INSTALL=1 "$root/scripts/fuzz.sh" --smoke || status=$?
else
  echo "== fuzz smoke: SKIPPED (clang-22 and libFuzzer are not installed and could not be)"
fi
exit "$status"
