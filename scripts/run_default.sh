#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job on its built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh
exec build/default/src/zero "$@"
