#!/usr/bin/env bash
# Configures and builds the default preset (Release, tests, benchmarks).
#
# Compiles through ccache when it is installed (scripts/bootstrap.sh installs it): the `cuda-sim`
# preset that scripts/test.sh builds next compiles the same library sources with the same flags,
# and ccache hands it these objects instead of compiling them again.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/compiler_launcher.sh
cmake --preset default "${zero_launcher_args[@]}" >/dev/null
cmake --build --preset default -- -j"$(nproc)"
