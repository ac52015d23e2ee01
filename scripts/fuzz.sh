#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, ASan + UBSan, libFuzzer) and runs every harness in tests/fuzz:
# first over its checked-in seed corpus, then fuzzing until SECONDS (default 60) have passed in
# all. Prints one line per harness (executions, coverage, corpus size, time, finding) and exits
# non-zero when any harness found something.
#
#   scripts/fuzz.sh [SECONDS]        CI runs `scripts/fuzz.sh 20` (scripts/test.sh)
#
# A finding (crash, sanitizer report, escaped non-zero::Error exception, InternalError, hang
# over 10 s, over 2 GiB of memory, leak) is written to tests/fuzz/<reader>/crashes/; the log is
# build/fuzz/logs/<reader>.log. Reproduce with build/fuzz/fuzz/fuzz_<reader> FILE (for an escaped
# exception, `gdb -ex 'catch throw' -ex run --args ...` stops where it was thrown; with
# ZERO_FUZZ_VERBOSE=1 a harness prints each zero::Error it gets). Once the bug is
# fixed, move the input into tests/fuzz/<reader>/corpus/, so every input that ever crashed is
# run again on each CI run. Inputs that add coverage collect in build/fuzz/corpus/<reader>/
# (not checked in), so repeated local runs build on each other.
#
# Environment: FUZZ_JOBS (harnesses run at once; default: the number of cores),
# FUZZ_ONLY (space-separated reader names to run), FUZZ_CMAKE_ARGS (extra configure arguments,
# e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache). Needs clang-14 and libclang-rt-14-dev
# (scripts/bootstrap.sh installs them); bootstraps nothing itself.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS]  (SECONDS: a whole number >= 1, default 60)" >&2
  exit 2
fi
jobs=${FUZZ_JOBS:-$(nproc)}

readers=()
for source in tests/fuzz/*/fuzz_*.cpp; do
  reader=$(basename "$(dirname "$source")")
  if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $reader "* ]]; then continue; fi
  readers+=("$reader")
done
if [ ${#readers[@]} -eq 0 ]; then
  echo "fuzz: no harness matches FUZZ_ONLY='${FUZZ_ONLY:-}'" >&2
  exit 2
fi

# shellcheck disable=SC2086  # FUZZ_CMAKE_ARGS is a list of arguments
cmake --preset fuzz ${FUZZ_CMAKE_ARGS:-} >/dev/null
if [ -n "${FUZZ_ONLY:-}" ]; then
  cmake --build build/fuzz -j"$(nproc)" --target "${readers[@]/#/fuzz_}"
else
  cmake --build --preset fuzz -- -j"$(nproc)"
fi

build=build/fuzz
mkdir -p "$build/logs" "$build/corpus"

# Runs one harness; its exit status lands in logs/<reader>.rc.
run_harness() {
  local reader=$1
  local crashes="tests/fuzz/$reader/crashes/"
  mkdir -p "$crashes" "$build/corpus/$reader"
  rm -f "$build/logs/$reader.rc" "$build/logs/$reader.seconds"  # no figures from an older run
  local rc=0 started=$SECONDS
  local options=()
  # A reader's dictionary of syntax tokens, where it has one.
  if [ -f "tests/fuzz/$reader/fuzz.dict" ]; then options+=(-dict="tests/fuzz/$reader/fuzz.dict"); fi
  # The first corpus folder receives new inputs, so the checked-in seeds stay as they are.
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/fuzz_$reader" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$crashes" "${options[@]}" \
    "$build/corpus/$reader" "tests/fuzz/$reader/corpus" >"$build/logs/$reader.log" 2>&1 || rc=$?
  echo "$rc" >"$build/logs/$reader.rc"
  echo $((SECONDS - started)) >"$build/logs/$reader.seconds"
  # An empty crashes/ folder is noise in the source tree.
  rmdir "$crashes" 2>/dev/null || true
}

running=0
for reader in "${readers[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_harness "$reader" &
  running=$((running + 1))
done
wait || true

# One line per harness, from libFuzzer's last status line ("#N DONE cov: C ft: F corp: K/Bb ...")
# and its final stats.
findings=0
for reader in "${readers[@]}"; do
  log="$build/logs/$reader.log"
  rc=$(cat "$build/logs/$reader.rc" 2>/dev/null || echo 1)
  status=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$status")
  per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corpus=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$status")
  took=$(cat "$build/logs/$reader.seconds" 2>/dev/null || true)
  if [ "$rc" = 0 ]; then
    finding=none
  else
    findings=$((findings + 1))
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    # The most specific line first: the harness's own report, a UBSan report, then the
    # sanitizer's or libFuzzer's summary.
    kind=$( (grep -m1 -oE '==FINDING== .{0,80}' "$log" ||
             grep -m1 -oE 'runtime error: .{0,80}' "$log" ||
             grep -m1 -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer): [^(]{0,60}' "$log" ||
             echo "exit status $rc") | head -n 1)
    finding="FOUND ($kind) input ${artifact:-not saved}, log $log"
  fi
  printf 'fuzz %-18s execs %-9s exec/s %-6s cov %-5s ft %-6s corpus %-11s time %ss  finding: %s\n' \
    "$reader" "${execs:-?}" "${per_second:-?}" "${cov:-?}" "${ft:-?}" "${corpus:-?}" "${took:-?}" "$finding"
done

if [ "$findings" -ne 0 ]; then
  echo "fuzz: $findings harness(es) found a problem; inputs are in tests/fuzz/<reader>/crashes/" >&2
  exit 1
fi
