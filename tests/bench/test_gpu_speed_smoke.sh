#!/usr/bin/env bash
# Tests of the GPU speed benchmark's pipeline (bench/gpu_speed.sh, gpu_record.py,
# torch_baseline.py) on a machine without a GPU. Not in ctest: CI has no torch.
#
#   tests/bench/test_gpu_speed_smoke.sh [ZERO_BIN]
#
# 1. gpu_record.py on hand-made inputs shaped like one GPU run (zero.jsonl with the issue-13 keys,
#    a kernel profile, PyTorch results): every figure in the record is checked against the value
#    worked out by hand, and failed, timed-out, skipped and key-less runs become null with their
#    reason.
# 2. With ZERO_BIN (default build/hA/src/zero, skipped when absent) and a torch at /usr/bin/python3:
#    bench/gpu_speed.sh --smoke end to end. Until the zero binary writes the issue-13 keys, the
#    zero side is expected to be null with the "predates the issue-13 log keys" reason.
# Prints "N passed, N failed" last.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
zero=${1:-$root/build/hA/src/zero}
tmp=$(mktemp -d /tmp/test_gpu_speed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() {  # NAME PYTHON-EXPRESSION over `r` (the record) and `k` (the kernel table text)
  if python3 - "$tmp/out/gpu_latest.json" "$tmp/out/gpu_kernels_latest.md" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
k = open(sys.argv[2]).read()
runs = {run["workload"]: run for run in r["runs"]}
ok = eval(sys.argv[3])
sys.exit(0 if ok else 1)
EOF
  then passed=$((passed + 1)); echo "ok   $1"
  else failed=$((failed + 1)); echo "FAIL $1: $2"
  fi
}

# --- 1. gpu_record.py on a made-up GPT-2 run --------------------------------------------------
# zero: steps 1..31, each 50 ms of 16384 tokens (327,680 tok/s), except steps 11 and 12, 100 ms
# each (window 11..30: 20 steps, 1.1 s, 327,680 tokens -> 297,890.9 tok/s); the same FLOPs
# every step, 0.5 x 700 TFLOP/s x 50 ms, so MFU 0.5 in 50 ms steps and 0.25 in 100 ms ones (over
# the window 20 x 17.5 TFLOP / 1.1 s / 700 TFLOP/s = 0.4545); peak_total rising to 20 GiB at
# step 30, 30 GiB at the profiled step 31 (outside the window, so not counted).
w=$tmp/work/gpt2-124m-b16-t1024
mkdir -p "$w" "$tmp/work/llama-1b-b4-t2048"
python3 - "$w" <<'EOF'
import json, sys
w = sys.argv[1]
with open(w + "/zero.jsonl", "w") as f:
    for step in range(1, 32):
        sec = 0.1 if step in (11, 12) else 0.05
        peak = (30 if step == 31 else 20 if step == 30 else 10) * (1 << 30)
        f.write(json.dumps({"step": step, "loss": 10.0 - step / 10, "tokens_per_s": 16384 / sec,
                            "mfu": 0.5 * 0.05 / sec, "memory_bytes": {"params": 1, "peak_total": peak},
                            "window_steps": 1, "window_seconds": sec, "window_tokens": 16384,
                            "peak_flops": 7e14, "peak_flops_dtype": "bf16"}) + "\n")
    f.write(json.dumps({"step": 31, "eval_loss": 3.0}) + "\n")
open(w + "/zero.log", "w").write(
    "zero train: gpt2-124m (124439808 parameters), data: synthetic\nstep 1 ...\n")
json.dump({"device": "H100", "step": 31, "step_seconds": 0.05, "kernel_seconds": 0.04,
           "kernels": [{"op": "linear_forward", "shape": "x[16384,768] w[2304,768]",
                        "dtype": "bf16", "calls": 12, "seconds": 0.01, "flops": 3.0e12},
                       {"op": "layernorm_forward", "shape": "x[16384,768]", "dtype": "bf16",
                        "calls": 25, "seconds": 0.005, "flops": 0}]},
          open(w + "/zero.kernels.json", "w"))
# Same FLOPs per token as zero (0.5 * 7e14 * 0.05 / 16384) so no warning is expected.
fps = 0.5 * 7e14 * 0.05
for mode, sec, peak in (("compile", 0.04, 25 << 30), ("eager", 0.08, 40 << 30)):
    steps = [5.0] + [sec] * 29
    json.dump({"workload": "gpt2-124m", "mode": mode, "tokens_per_s": 16384 / sec,
               "peak_allocated_bytes": peak, "peak_reserved_bytes": peak + (1 << 30),
               "parameters": 124439808, "model_flops_per_step": fps, "step_seconds": steps,
               "losses": [1.0] * 30, "torch_version": "2.11.0", "device": "NVIDIA H100 80GB HBM3",
               "window": [11, 30], "batch": 16, "seq_len": 1024,
               "attention": "sdpa-flash", "compiled_graphs": 2 if mode == "compile" else None,
               "graph_breaks": 1 if mode == "compile" else None},
              open("%s/torch_%s.json" % (w, mode), "w"))
for name in ("zero", "torch_compile", "torch_eager"):
    open("%s/%s.status" % (w, name), "w").write('{"rc": 0, "seconds": 10, "limit_s": 150}\n')
EOF
l=$tmp/work/llama-1b-b4-t2048
# Llama: zero's binary without the new keys; compile timed out; eager skipped.
echo '{"step": 11, "loss": 9.0, "tokens_per_s": 1000, "mfu": 0.1, "memory_bytes": {"peak_total": 5}}' >"$l/zero.jsonl"
echo '{"rc": 0, "seconds": 10, "limit_s": 150}' >"$l/zero.status"
echo 'compiling...' >"$l/torch_compile.log"
echo '{"rc": 124, "seconds": 240, "limit_s": 240}' >"$l/torch_compile.status"
echo '{"skipped": "the 540 s budget (SPEED_BUDGET_S) was spent before this run"}' >"$l/torch_eager.status"
echo '{"matmul_bf16_tflops": 712.34}' >"$tmp/work/matmul.log"
echo '{"rc": 0, "seconds": 3, "limit_s": 60}' >"$tmp/work/matmul.status"
echo 'NVIDIA H100 80GB HBM3, 81559 MiB, 580.00, 1980 MHz' >"$tmp/work/nvidia_smi.txt"

python3 "$root/bench/gpu_record.py" --work "$tmp/work" --out-dir "$tmp/out" --window 11 30 \
  --commit abc1234 --date 2026-11-25T00:00:00Z \
  --workloads gpt2-124m-b16-t1024 llama-1b-b4-t2048 >"$tmp/record.txt" 2>&1
echo "record rc=$?"; tail -n 12 "$tmp/record.txt"

g='runs["gpt2-124m-b16-t1024"]'
m='runs["llama-1b-b4-t2048"]'
check "top-level schema" 'set(["device", "date", "commit", "matmul_bf16_tflops", "runs"]) <= set(r) and r["device"] == "NVIDIA H100 80GB HBM3" and r["commit"] == "abc1234" and r["date"] == "2026-11-25T00:00:00Z"'
check "matmul rate is zero's peak_flops" 'r["matmul_bf16_tflops"] == 700.0 and r["torch_matmul_bf16_tflops"] == 712.3'
check "run schema" "all(key in $g for key in ('workload', 'zero_tokens_per_s', 'torch_compile_tokens_per_s', 'torch_eager_tokens_per_s', 'zero_peak_gib', 'torch_peak_gib', 'zero_mfu'))"
check "zero tokens/s over steps 11..30" "abs(${g}['zero_tokens_per_s'] - 20 * 16384 / 1.1) < 0.1"
check "zero MFU weighted by time" "${g}['zero_mfu'] == round(20 * 0.5 * 0.05 / 1.1, 4)"
check "zero peak up to step 30 only" "${g}['zero_peak_gib'] == 20.0"
check "torch tokens/s and peaks" "${g}['torch_compile_tokens_per_s'] == 409600.0 and ${g}['torch_eager_tokens_per_s'] == 204800.0 and ${g}['torch_peak_gib'] == 25.0 and ${g}['torch_eager_peak_gib'] == 40.0"
check "ratio and verdict" "abs(${g}['zero_vs_compile'] - (20 * 16384 / 1.1) / 409600) < 1e-3 and ${g}['verdict'].startswith('below 0.8x')"
check "torch MFU on zero's FLOP count" "${g}['torch_compile_mfu'] == round(409600 * 0.5 * 7e14 * 0.05 / 16384 / 7e14, 4)"
check "parity: parameters, FLOPs" "${g}['zero_parameters'] == ${g}['torch_parameters'] == 124439808 and not any('differ' in x for x in ${g}['warnings'])"
check "graph breaks flagged" "${g}['torch_compile_graphs'] == 2 and any('1 graph breaks' in x for x in ${g}['warnings'])"
check "missing key named, zero null" "${m}['zero_tokens_per_s'] is None and \"lacks key 'window_steps'\" in ${m}['zero_error']"
check "timeout recorded" "${m}['torch_compile_tokens_per_s'] is None and 'timed out after 240 s' in ${m}['torch_compile_error']"
check "skip recorded" "${m}['torch_eager_tokens_per_s'] is None and 'budget' in ${m}['torch_eager_error'] and ${m}['verdict'] == 'not measured'"
check "kernel table rows" "'| linear_forward | x[16384,768] w[2304,768] | bf16 | 12 | 10.000 | 20.0 | 300.0 |' in k and '| layernorm_forward | x[16384,768] | bf16 | 25 | 5.000 | 10.0 |  |' in k"
check "kernel table header, missing profile" "'kernels 40.00 ms (80.0% of the step' in k and 'No kernel profile' in k"

# The verdict's four outcomes (issue 13: >= 1.1x at no more memory; 0.8x and 1.1x the bounds).
if python3 -B -c "
import sys; sys.path.insert(0, '$root/bench'); from gpu_record import verdict
assert verdict(1.1, 10, 10) == 'target met'
assert verdict(1.2, 11, 10).startswith('fast enough, but more peak memory')
assert verdict(1.2, None, 10).startswith('fast enough, but')
assert verdict(0.8, 1, 10).startswith('0.8-1.1x')
assert verdict(0.79, 1, 10) == 'below 0.8x compile'
assert verdict(None, 1, 10) == 'not measured'
"; then passed=$((passed + 1)); echo "ok   verdicts"
else failed=$((failed + 1)); echo "FAIL verdicts"
fi

# A log printed every 4 steps (steps_per_print 4) has a line covering steps 9..12: the window
# 11..30 cannot be cut out of it.
python3 - "$w/zero.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[1], "w") as f:
    for l in lines:
        if "window_steps" in l and l["step"] % 4 == 0:
            l["window_steps"] = 4
            f.write(json.dumps(l) + "\n")
EOF
python3 "$root/bench/gpu_record.py" --work "$tmp/work" --out-dir "$tmp/out" --window 11 30 \
  --workloads gpt2-124m-b16-t1024 >/dev/null 2>&1
check "coarse log windows refused" "${g}['zero_tokens_per_s'] is None and 'steps_per_print must be 1' in ${g}['zero_error']"

# --- 2. the whole pipeline on the CPU ---------------------------------------------------------
if [[ -x $zero ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  log=$tmp/smoke.log
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$root/bench/gpu_speed.sh" --smoke "$zero" >"$log" 2>&1
  rc=$?
  smoke_out=$(sed -n 's/^(record, kernel table and logs in \(.*\))$/\1/p' "$log")
  tail -n 8 "$log"
  if [[ $rc -eq 0 && -f $smoke_out/gpu_latest.json ]]; then
    mkdir -p "$tmp/out" && cp "$smoke_out"/gpu_latest.json "$smoke_out"/gpu_kernels_latest.md "$tmp/out/"
    check "smoke: torch eager measured, compile skipped" 'all(run["torch_eager_tokens_per_s"] > 0 and run["torch_compile_tokens_per_s"] is None and "smoke" in run["torch_compile_error"] for run in r["runs"])'
    if "$zero" train --help 2>&1 | grep -q -- '--profile-kernels '; then
      check "smoke: zero measured, parameters match" 'all(run["zero_tokens_per_s"] > 0 and run["zero_mfu"] > 0 and run["zero_parameters"] == run["torch_parameters"] and "warnings" not in run for run in r["runs"])'
      check "smoke: kernel tables" 'k.count("| op | shape | dtype | calls | ms | % of step | TFLOP/s |") == 2'
    else
      check "smoke: old zero binary named" 'all("predates the issue-13 log keys" in run["zero_error"] for run in r["runs"])'
    fi
    check "smoke: wrote outside bench/results" "'$smoke_out'.startswith('/tmp/')"
    # PyTorch's per-kernel tables: one per workload (eager; compile is skipped in --smoke).
    tables=$(grep -c '^## PyTorch eager, ' "$smoke_out/torch_kernels_latest.md" 2>/dev/null)
    if [[ $tables == 2 ]] && grep -q '^| kind | calls | ms | % of step |' "$smoke_out/torch_kernels_latest.md"; then
      passed=$((passed + 1)); echo "ok   smoke: PyTorch kernel tables"
    else
      failed=$((failed + 1)); echo "FAIL smoke: PyTorch kernel tables (found ${tables:-none})"
    fi
    rm -rf "$smoke_out"
  else
    failed=$((failed + 1)); echo "FAIL smoke run (rc $rc), see above"
  fi
else
  echo "skip the end-to-end smoke run: no zero binary at $zero or no torch at /usr/bin/python3"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
