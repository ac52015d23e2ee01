#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (the command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh
ctest --preset default "$@"
