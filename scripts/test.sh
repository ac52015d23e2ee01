#!/usr/bin/env bash
# Installs dependencies, builds, runs every test and the fuzz harnesses (the command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time, printed as it ends and again at the end: the whole run must stay
# under 30 minutes on CI's 2 cores, and these say where the time goes.
step_times=()
step_started=$SECONDS
end_step() {
  step_times+=("$(printf '%-34s %5d s' "$1" $((SECONDS - step_started)))")
  echo "test: step '$1' took $((SECONDS - step_started)) s"
  step_started=$SECONDS
}
trap 'printf "test: %s\n" "${step_times[@]}"' EXIT
scripts/bootstrap.sh
end_step "bootstrap"
scripts/build.sh
end_step "build (default preset)"
ctest --preset default "$@"
end_step "tests (default preset)"
# The CUDA backend - its real kernels and host code - on the CPU simulator (tests/cuda_sim), so
# the `cuda` tests run for real without a GPU. Needs only the CUDA toolkit's headers; builds just
# the cuda test executables.
if [ -e "${CUDAToolkit_ROOT:-/usr/local/cuda}/include/cuda_runtime.h" ]; then
  # Through ccache (scripts/compiler_launcher.sh) the library sources that include no CUDA header
  # come from the default build's objects: the two presets compile them with the same flags.
  source scripts/compiler_launcher.sh
  cmake --preset cuda-sim "${zero_launcher_args[@]}" >/dev/null
  cmake --build --preset cuda-sim -- -j"$(nproc)"
  end_step "build (cuda-sim preset)"
  # Streams run lazily: work waits in its stream's queue until the host needs it, so a stream
  # that reads another's results without an event wait reads stale data and fails a comparison.
  CUDA_SIM_STREAMS=lazy OMP_NUM_THREADS=1 ctest --preset cuda-sim | tee build/cuda-sim/ctest.log
  # Again with blocks and threads scheduled in the opposite order (a kernel race: a missing
  # __syncthreads, blocks depending on each other) and with other streams run as far ahead as
  # they can (a stream overwriting what another has yet to read).
  CUDA_SIM_STREAMS=others-first CUDA_SIM_SCHEDULE=reverse OMP_NUM_THREADS=1 \
    ctest --preset cuda-sim | tee -a build/cuda-sim/ctest.log
  # The point is that they run: a GTEST_SKIP (no simulated device found) fails the step.
  if grep -q '\*\*\*Skipped' build/cuda-sim/ctest.log; then
    echo "test: cuda tests were skipped on the CUDA simulator" >&2
    exit 1
  fi
  end_step "tests (cuda-sim, two schedules)"
else
  echo "test: no CUDA headers (CUDAToolkit_ROOT): the CUDA simulator's tests are not run"
fi
# The libFuzzer harnesses of the input readers: each over its seed corpus plus a short fuzzing
# budget (20 s per harness, two at a time on CI's 2 cores); a finding fails the run.
scripts/fuzz.sh 20
end_step "fuzz (build and 20 s a harness)"
