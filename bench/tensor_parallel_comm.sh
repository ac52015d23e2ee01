#!/usr/bin/env bash
# Tensor-parallel communication benchmark on the CPU backend (issue 16): for each tensor-parallel
# size tp (one MPI rank per slice, dp = 1) and micro-batch size, a Llama-shaped model trained by
# an Engine; prints the step time, the tensor group's all-reduce count and bytes per step next
# to the closed form (4 * layers + 2) [N, C] all-reduces per micro-batch, the time blocked in
# them, the bandwidth that implies, and the same all-reduce timed in isolation. Not a test: it
# prints a table (and writes it to OUT when given).
#
#   bench/tensor_parallel_comm.sh [BENCH_BINARY] [OUT]
#
# BENCH_BINARY defaults to build/default/bench/bench_tensor_parallel_comm (the
# bench_tensor_parallel_comm target). Environment:
#   TP_SIZES        tensor-parallel sizes (= ranks); 1 is the no-communication reference
#                   (default "1 2 4"; the model's 8 heads / 4 key-value heads allow up to 4)
#   MICRO_BATCHES   sequences of 128 tokens per micro-batch (default "2 4")
#   GAS             gradient_accumulation_steps           (default 2)
#   STEPS           measured steps, after one warm-up step (default 4)
# Ranks run with OMP_NUM_THREADS=1 under `mpirun --oversubscribe`: with more ranks than free
# cores the operating system time-slices them, and a rank's time blocked in an all-reduce then
# includes waiting for another rank's compute (and for its core); the isolated all-reduce line
# is the transfer alone. Run on a quiet machine with at least max(TP_SIZES) cores for figures
# that measure the communication.
set -euo pipefail

BENCH=${1:-build/default/bench/bench_tensor_parallel_comm}
OUT=${2:-}
TP_SIZES=${TP_SIZES:-"1 2 4"}
MICRO_BATCHES=${MICRO_BATCHES:-"2 4"}
GAS=${GAS:-2}
STEPS=${STEPS:-4}

if [[ ! -x "$BENCH" ]]; then
  echo "tensor_parallel_comm.sh: no benchmark binary at $BENCH (build the bench_tensor_parallel_comm target, or pass its path)" >&2
  exit 2
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo " (+ uncommitted work)" || true)
{
  echo "# bench/tensor_parallel_comm.sh on the CPU backend, $(date -u +%Y-%m-%dT%H:%MZ), commit ${commit}${dirty}"
  echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; OMP_NUM_THREADS=1 per rank"
  for micro in $MICRO_BATCHES; do
    for tp in $TP_SIZES; do
      env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --oversubscribe -np "$tp" -x OMP_NUM_THREADS=1 "$BENCH" "$STEPS" "$micro" "$GAS"
    done
  done
} | if [[ -n "$OUT" ]]; then tee "$OUT"; else cat; fi
