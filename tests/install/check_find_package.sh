#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and runs a consumer
# project that uses find_package(zero). Usage: check_find_package.sh BUILD_DIR SOURCE_DIR
# [LINKER_FLAGS]: the build's own exe linker flags, which a consumer of an instrumented build
# (the asan preset) needs too, to link the sanitizer runtimes.
set -euo pipefail
build_dir=$1
source_dir=$2
linker_flags=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXE_LINKER_FLAGS="$linker_flags" >/dev/null
# Its output only when it fails (ctest shows it).
if ! build_log=$(cmake --build "$work/consumer" 2>&1); then
  echo "$build_log" | tail -20
  exit 1
fi
"$work/consumer/consumer"
