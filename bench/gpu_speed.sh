#!/usr/bin/env bash
# The GPU speed benchmark of issue 13: zero.cpp's `zero train --device cuda` and the PyTorch
# reference (bench/torch_baseline.py, torch.compile and eager) on the same card, in one call, on
# the same shapes, then bench/gpu_record.py writes the record (bench/gpu_speed_notes.md says what
# each number means and how it is measured).
#
#   bench/gpu_speed.sh ZERO_BIN [WORKLOAD ...]   on the GPU machine (scripts/gpu_check.sh speed
#                                                 calls it with the unpacked bundle's bin/zero)
#   bench/gpu_speed.sh --smoke ZERO_BIN          on a machine without a GPU: tiny shapes on the
#                                                 CPU, to test the whole pipeline end to end
#
# Workloads: gpt2-124m-b16-t1024 (GPT-2 124M, B=16, T=1024) and llama-1b-b4-t2048 (the
# llama-1b-mha preset, B=4, T=2048); default both.
#
# Expected runtime on an H100 (the device tool kills a command at 10 minutes): per workload
# torch.compile ~1-2 min (compilation is most of it), eager ~20-40 s, zero train ~30-60 s
# (start-up, the bf16 matmul measurement, weight init, 31 steps; longer while zero's attention
# runs on CUDA cores); about 5-6 minutes for both.
# Every run has its own wall-clock limit, and none starts past the overall budget
# (SPEED_BUDGET_S), so a hang costs one run, never the record.
#
# Output: OUT (default /tmp/zero_gpu_speed; --smoke: a fresh temp dir, never bench/results/)
# receives only gpu_latest.json, gpu_kernels_latest.md, speed_summary.txt and speed_logs.tar.gz
# (every log and raw result), since the device tool brings back at most 8 files. The lead copies
# the first two into bench/results/ and commits them.
#
# Environment:
#   SPEED_BUDGET_S        seconds this script may spend in all (default 540)
#   PYTHON                the Python with torch (default python3; --smoke: /usr/bin/python3)
#   ZERO_SPEED_FLAGS      extra `zero train` flags (default "--tiled-mlp off": tiled-mlp auto
#                         would split GPT-2's MLP at T=1024 > hidden 768 and recompute it in
#                         backward, work the PyTorch step does not do)
#   TORCH_BASELINE_FLAGS  extra torch_baseline.py flags (e.g. "--sdpa auto")
#   SPEED_ZERO_ONLY       1: zero train alone, PyTorch's runs skipped (an A/B of a zero switch
#                         such as ZERO_CUDA_GEMM_SPLIT=0 against a full run on the same card)
#   ZERO_COMMIT           the commit the zero binary was built from (default: git describe here)
#   TORCH_LD_LIBRARY_PATH when set (even empty), the LD_LIBRARY_PATH PyTorch runs with, so the
#                         libraries carried for zero (libgomp, OpenMPI) cannot shadow torch's
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
smoke=0
if [[ ${1:-} == --smoke ]]; then smoke=1; shift; fi
if [[ $# -lt 1 ]]; then
  echo "usage: bench/gpu_speed.sh [--smoke] ZERO_BIN [WORKLOAD ...]" >&2
  exit 2
fi
zero=$1; shift
if [[ ! -x $zero ]]; then
  echo "gpu_speed.sh: no zero binary at $zero (scripts/gpu_check.sh pack builds one)" >&2
  exit 2
fi

budget=${SPEED_BUDGET_S:-540}
zero_help=$("$zero" train --help 2>&1 || true)
default_zero_flags=""
grep -q -- '--tiled-mlp ' <<<"$zero_help" && default_zero_flags="--tiled-mlp off"
zero_flags=${ZERO_SPEED_FLAGS-$default_zero_flags}
torch_flags=${TORCH_BASELINE_FLAGS:-}
commit=${ZERO_COMMIT:-$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)}
if ((smoke)); then
  python=${PYTHON:-/usr/bin/python3}
  out=$(mktemp -d /tmp/zero_gpu_speed_smoke.XXXXXX)
  device=cpu
  window=(3 12)
  workloads=(gpt2-smoke llama-smoke)
  limits=(60 60 60)                 # zero, torch compile, torch eager
else
  python=${PYTHON:-python3}
  out=${OUT:-/tmp/zero_gpu_speed}
  device=cuda
  window=(11 30)
  workloads=("$@")
  [[ ${#workloads[@]} -eq 0 ]] && workloads=(gpt2-124m-b16-t1024 llama-1b-b4-t2048)
  limits=(240 240 150)
fi
# zero trains one step past the window and profiles that step, so the per-kernel timing (events
# around every op) cannot slow a timed step.
zero_steps=$((window[1] + 1))
work=$(mktemp -d /tmp/zero_gpu_speed_work.XXXXXX)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
torch_env=(env)
[[ -n ${TORCH_LD_LIBRARY_PATH+set} ]] && torch_env=(env "LD_LIBRARY_PATH=$TORCH_LD_LIBRARY_PATH")

# workload -> zero preset, B, T, torch_baseline workload
shape_of() {
  case $1 in
    gpt2-124m-b16-t1024) echo "gpt2-124m 16 1024 gpt2-124m" ;;
    llama-1b-b4-t2048)   echo "llama-1b-mha 4 2048 llama-1b-mha" ;;
    gpt2-smoke)          echo "tiny 2 32 gpt2-124m" ;;     # zero's tiny-on-synthetic shape
    llama-smoke)         echo "tiny-llama 2 32 llama-1b-mha" ;;
    *) return 1 ;;
  esac
}
for w in "${workloads[@]}"; do
  shape_of "$w" >/dev/null || { echo "gpu_speed.sh: unknown workload $w" >&2; exit 2; }
done

# Runs a command under a wall-clock limit (cut to what is left of the budget), its output to
# LOG, and writes STATUS as JSON: rc, seconds, limit (rc 124: timed out), or why it was skipped.
timed_run() {
  local status=$1 log=$2 limit=$3; shift 3
  local left=$((budget - SECONDS - 20))   # 20 s kept for the record and the tarball
  if ((left < 30)); then
    printf '{"skipped": "the %s s budget (SPEED_BUDGET_S) was spent before this run"}\n' \
      "$budget" >"$status"
    echo "   skipped: budget spent"
    return 0
  fi
  ((limit > left)) && limit=$left
  local start=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  printf '{"rc": %d, "seconds": %d, "limit_s": %d}\n' "$rc" $((SECONDS - start)) "$limit" >"$status"
  # The last progress lines (step lines, tokens/s) or the error, not the end-of-run summary.
  grep -iE '^step|tokens/s|error|failed|Traceback|torch_baseline.py:' "$log" | tail -n 2 | cut -c1-160 | sed 's/^/   /' || true
  ((rc == 124 || rc == 137)) && echo "   TIMED OUT after $limit s"
  return 0
}

skip() {  # STATUS REASON
  printf '{"skipped": "%s"}\n' "$2" >"$1"
}

echo "== gpu_speed.sh: ${workloads[*]} on $device, window ${window[0]}..${window[1]}," \
     "commit $commit, budget $budget s"
if ((!smoke)) && [[ ${SPEED_ZERO_ONLY:-0} != 1 ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
    >"$work/nvidia_smi.txt" 2>&1 || true
  cat "$work/nvidia_smi.txt"
  echo "== bf16 matmul rate through PyTorch (a cross-check of zero's measured peak)"
  timed_run "$work/matmul.status" "$work/matmul.log" 60 \
    "${torch_env[@]}" "$python" "$root/bench/torch_baseline.py" --matmul-only
fi

profile_flags=()
if grep -q -- '--profile-kernels ' <<<"$zero_help"; then
  profile_flags=(--profile-kernels "$zero_steps")
else
  echo "   note: this zero binary has no --profile-kernels; no per-kernel table"
fi

for w in "${workloads[@]}"; do
  read -r preset batch seq torch_workload <<<"$(shape_of "$w")"
  dir=$work/$w
  mkdir -p "$dir"
  # bf16 mixed precision on the GPU; the CPU smoke run stays f32 (the CPU's bf16 is emulated).
  bf16=$([[ $device == cuda ]] && echo true || echo false)
  cat >"$dir/ds_config.json" <<EOF
{"train_micro_batch_size_per_gpu": $batch, "gradient_accumulation_steps": 1, "steps_per_print": 1,
 "bf16": {"enabled": $bf16},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
 "gradient_clipping": 1.0, "zero_optimization": {"stage": 0}}
EOF
  # PyTorch first: its run time is predictable (compilation ~1-2 min), while zero's is what this
  # benchmark is finding out; zero, last, gets whatever the budget has left.
  for mode in compile eager; do
    echo "== $w: PyTorch $mode"
    if [[ ${SPEED_ZERO_ONLY:-0} == 1 ]]; then
      skip "$dir/torch_$mode.status" "skipped: SPEED_ZERO_ONLY=1 (an A/B run of zero alone)"
      echo "   skipped (SPEED_ZERO_ONLY)"
      continue
    fi
    if ((smoke)) && [[ $mode == compile ]]; then
      skip "$dir/torch_compile.status" "skipped in --smoke: the CPU smoke run tests the pipeline, not torch.compile"
      echo "   skipped (smoke)"
      continue
    fi
    smoke_flags=()
    ((smoke)) && smoke_flags=(--smoke --device cpu)
    limit=$([[ $mode == compile ]] && echo "${limits[1]}" || echo "${limits[2]}")
    # shellcheck disable=SC2086
    timed_run "$dir/torch_$mode.status" "$dir/torch_$mode.log" "$limit" \
      "${torch_env[@]}" "$python" "$root/bench/torch_baseline.py" --workload "$torch_workload" --mode "$mode" \
      --batch "$batch" --seq-len "$seq" --steps "${window[1]}" --window-start "${window[0]}" \
      --out "$dir/torch_$mode.json" --profile-kernels "$dir/torch_$mode.kernels.md" \
      "${smoke_flags[@]}" $torch_flags
  done

  kernel_flags=()
  ((${#profile_flags[@]})) && kernel_flags=("${profile_flags[@]}" --profile-kernels-json "$dir/zero.kernels.json")
  echo "== $w: zero train --device $device --model $preset (B=$batch, T=$seq)"
  # shellcheck disable=SC2086  # ZERO_SPEED_FLAGS is a list of flags
  timed_run "$dir/zero.status" "$dir/zero.log" "${limits[0]}" \
    "$zero" train --device "$device" --model "$preset" --seq-len "$seq" --steps "$zero_steps" \
    --deepspeed "$dir/ds_config.json" --strict-config true --log-json "$dir/zero.jsonl" \
    "${kernel_flags[@]}" $zero_flags
done

echo "== record"
record_rc=0
"$python" "$root/bench/gpu_record.py" --work "$work" --out-dir "$out" \
  --window "${window[0]}" "${window[1]}" --commit "$commit" --zero-flags "$zero_flags" \
  --workloads "${workloads[@]}" >"$out/speed_summary.txt" 2>&1 || record_rc=$?
# PyTorch's per-kernel tables (one profiled step after each window), side by side with zero's.
shopt -s nullglob
torch_tables=("$work"/*/torch_compile.kernels.md "$work"/*/torch_eager.kernels.md)
shopt -u nullglob
if ((${#torch_tables[@]})); then
  cat "${torch_tables[@]}" >"$out/torch_kernels_latest.md"
fi
tar -czf "$out/speed_logs.tar.gz" -C "$work" . && rm -rf "$work"
cat "$out/speed_summary.txt"
echo "(record, kernel table and logs in $out)"
exit "$record_rc"
