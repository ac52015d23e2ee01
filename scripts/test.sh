#!/usr/bin/env bash
# Installs dependencies, builds, runs every test and the fuzz harnesses (the command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh
ctest --preset default "$@"
# The libFuzzer harnesses of the input readers: each over its seed corpus plus a short fuzzing
# budget (20 s per harness, two at a time on CI's 2 cores); a finding fails the run.
scripts/fuzz.sh 20
