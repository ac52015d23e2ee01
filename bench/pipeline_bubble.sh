#!/usr/bin/env bash
# Pipeline bubble benchmark on the CPU backend (issue 16): for each stage count p (one MPI rank
# per stage) and micro-batch count m, every stage's measured idle fraction of a 1F1B training
# step next to the ideal bubble (p - 1) / (m + p - 1). Not a test: it prints a table (and
# writes it to OUT when given). Idle is everything outside ForwardPass/BackwardPass
# (PipelineEngine::last_timing): waiting on neighbours, sends and receives, the optimizer step.
#
#   bench/pipeline_bubble.sh [BENCH_BINARY] [OUT]
#
# BENCH_BINARY defaults to build/default/bench/bench_pipeline_bubble (the bench_pipeline_bubble
# target). Environment:
#   STAGES          stage counts (= ranks) to run   (default "2 4")
#   MICRO_BATCHES   micro-batches per step          (default "1 2 4 8 16")
#   STEPS           measured steps per point, after one warm-up step (default 3)
# Ranks run with OMP_NUM_THREADS=1 under `mpirun --oversubscribe`: with more ranks than cores
# the operating system time-slices the stages, so the idle fractions then measure the scheduler
# as much as the schedule; run on a quiet machine with at least max(STAGES) cores for numbers
# that mean what the formula means.
set -euo pipefail

BENCH=${1:-build/default/bench/bench_pipeline_bubble}
OUT=${2:-}
STAGES=${STAGES:-"2 4"}
MICRO_BATCHES=${MICRO_BATCHES:-"1 2 4 8 16"}
STEPS=${STEPS:-3}

if [[ ! -x "$BENCH" ]]; then
  echo "pipeline_bubble.sh: no benchmark binary at $BENCH (build the bench_pipeline_bubble target, or pass its path)" >&2
  exit 2
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo " (+ uncommitted work)" || true)
{
  echo "# bench/pipeline_bubble.sh on the CPU backend, $(date -u +%Y-%m-%dT%H:%MZ), commit ${commit}${dirty}"
  echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; OMP_NUM_THREADS=1 per rank"
  for p in $STAGES; do
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun --oversubscribe -np "$p" -x OMP_NUM_THREADS=1 "$BENCH" "$STEPS" $MICRO_BATCHES
  done
} | if [[ -n "$OUT" ]]; then tee "$OUT"; else cat; fi
