#!/usr/bin/env bash
# Builds the libFuzzer harnesses (test/fuzz, clang-22 with ASan+UBSan) and
# fuzzes each for a time budget over its committed corpus (docs/fuzzing.md).
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]   each harness SECONDS (default 60)
#   scripts/fuzz.sh --smoke                  CI: ctest's short run of every
#                                            harness over its committed corpus
#
# New inputs go to a scratch corpus ($DSC_FUZZ_WORK/corpus/<harness>, kept
# between runs), never into test/fuzz/corpus; crashes to
# $DSC_FUZZ_WORK/crashes/<harness>/. Prints, per harness, the executions,
# exec/s, coverage (libFuzzer's cov: edges and ft: features), the corpus size
# and the crashes. Exits 1 if any harness found one.
#   DSC_FUZZ_RUNS=N        stop each harness after N executions instead
#   DSC_FUZZ_KEEP_GOING=1  keep fuzzing after a crash (libFuzzer -fork=1)
#   DSC_FUZZ_LENIENT=1     an undocumented exception type is not a finding
#   DSC_SAN_BUILD_DIR      the build (default build-asan, shared with sanitize.sh)
#   DSC_BUILD_LOCK=FILE    build under flock FILE (machines shared by several builds)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DSC_SAN_BUILD_DIR:-$root/build-asan}"
work="${DSC_FUZZ_WORK:-$build/fuzz-work}"
all=(ds_config hostfile_launch safetensors npy token_file plan_loader onnx_import pt2_import torchscript_import)

smoke=0
seconds=60
if [ "${1:-}" = --smoke ]; then
  smoke=1
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [[ " ${all[*]} " == *" $h "* ]] || { echo "fuzz.sh: no harness '$h' (${all[*]})" >&2; exit 2; }
done

"$root/scripts/configure-sanitize.sh" "$build"
cmake "$build" > /dev/null # picks up what the tree's CMake files now configure
# A harness of an optional part (torchscript_import: libtorch) is built only
# where that part is.
present=()
for h in "${harnesses[@]}"; do
  if grep -q "fuzz_$h" "$build/build.ninja" 2> /dev/null; then
    present+=("$h")
  else
    echo "fuzz.sh: $h: SKIPPED (not configured: its frontend's library is not installed)"
  fi
done
harnesses=("${present[@]}")
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
lock=()
[ -z "${DSC_BUILD_LOCK:-}" ] || lock=(flock "$DSC_BUILD_LOCK")
"${lock[@]}" cmake --build "$build" -j "${DSC_JOBS:-$(nproc)}" --target "${targets[@]}"

# One thread: a step's cost stays small and the runs reproducible. The
# sanitizer options are built into the binaries (cmake/SanitizerDefaults.c).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

if [ "$smoke" = 1 ]; then
  cd "$build"
  ctest --output-on-failure -L fuzz -j "${DSC_JOBS:-$(nproc)}"
  exit
fi

# The harnesses' per-input files, in one folder removed at the end (a
# crashing input leaves its harness's scratch folder behind).
if [ -z "${DSC_FUZZ_TMPDIR:-}" ]; then
  tmpbase=/tmp
  [ ! -w /dev/shm ] || tmpbase=/dev/shm
  DSC_FUZZ_TMPDIR=$(mktemp -d "$tmpbase/dsc-fuzz-run.XXXXXX")
  export DSC_FUZZ_TMPDIR
  trap 'rm -rf "$DSC_FUZZ_TMPDIR"' EXIT
fi

found=0
printf '%-16s %12s %8s %7s %7s %7s %8s\n' harness executions exec/s cov ft corpus crashes
for h in "${harnesses[@]}"; do
  corpus="$work/corpus/$h"
  crashes="$work/crashes/$h"
  mkdir -p "$corpus" "$crashes" "$work/logs"
  log="$work/logs/$h.log"
  dict=()
  [ ! -f "$root/test/fuzz/dict/$h.dict" ] || dict=("-dict=$root/test/fuzz/dict/$h.dict")
  budget=("-max_total_time=$seconds")
  [ -z "${DSC_FUZZ_RUNS:-}" ] || budget=("-runs=$DSC_FUZZ_RUNS")
  keep=()
  [ "${DSC_FUZZ_KEEP_GOING:-0}" = 0 ] ||
    keep=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  before=$(ls "$crashes" | wc -l)
  set +e
  nice -n 10 "$build/bin/fuzz_$h" "${budget[@]}" "${keep[@]}" "${dict[@]}" -timeout=25 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$corpus" "$root/test/fuzz/corpus/$h" >"$log" 2>&1
  status=$?
  set -e
  # The last status line: "#N ... cov: C ft: F corp: K/..." (fork mode: "#N: cov: ...").
  last=$(grep -aE '^#[0-9]+:?[[:space:]].*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  execs=$(grep -aoE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  [ -n "$execs" ] || execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
  rate=$(grep -aoE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  [ -n "$rate" ] || rate=$(sed -nE 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"$last")
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  size=$(sed -nE 's/.*corp: ([0-9]+).*/\1/p' <<<"$last")
  new=$(( $(ls "$crashes" | wc -l) - before ))
  if [ "$new" -gt 0 ] || { [ "$status" != 0 ] && [ "${DSC_FUZZ_KEEP_GOING:-0}" = 0 ]; }; then
    found=1
  fi
  printf '%-16s %12s %8s %7s %7s %7s %8s\n' "$h" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "${size:-?}" "$new"
  if [ "$new" -gt 0 ] || [ "$status" != 0 ]; then
    echo "  exit status $status; log $log; reproducers in $crashes:"
    ls -t "$crashes" | head -5 | sed 's/^/    /'
    grep -aE -m3 'ERROR: |runtime error:|undocumented exception|internal error' "$log" |
      sed 's/^/    /' || true
  fi
done
exit "$found"
