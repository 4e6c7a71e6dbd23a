#!/usr/bin/env bash
# The unit and lit tests under AddressSanitizer + UndefinedBehaviorSanitizer:
# builds everything with clang-22 -fsanitize=address,undefined
# -fno-sanitize-recover=undefined (the build scripts/fuzz.sh shares, so the
# fuzz harnesses' short runs are part of it) and runs every ctest test.
# A sanitizer report fails the test that triggered it.
#   DSC_SAN_BUILD_DIR   the build (default build-asan)
#   DSC_BUILD_LOCK=FILE build under flock FILE
#   extra arguments go to ctest (e.g. -R gtest- or -LE fuzz)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_SAN_BUILD_DIR:-$root/build-asan}"
start=$(date +%s)
"$root/scripts/configure-sanitize.sh" "$build"
lock=()
[ -z "${DSC_BUILD_LOCK:-}" ] || lock=(flock "$DSC_BUILD_LOCK")
"${lock[@]}" cmake --build "$build" -j "${DSC_JOBS:-$(nproc)}"
built=$(date +%s)

# The binaries carry their sanitizer options (cmake/SanitizerDefaults.c);
# MPI's plugins stay loaded so that LeakSanitizer can name (and the
# suppressions match) what they keep until exit.
export OMPI_MCA_mca_base_component_disable_dlclose=1
cd "$build"
status=0
ctest --output-on-failure -j "${DSC_JOBS:-$(nproc)}" "$@" || status=$?
end=$(date +%s)
echo "sanitize.sh: build $((built - start)) s, tests $((end - built)) s"
exit "$status"
