#!/usr/bin/env python3
"""Turns one bench/gpu_speed.sh run into issue 13's record (standard library only).

  gpu_record.py --work DIR --out-dir DIR --window 11 30 --commit C --workloads W [W ...]

Reads DIR/<workload>/{zero.jsonl, zero.log, zero.status, zero.kernels.json,
torch_compile.json, torch_eager.json, *.status, *.log} and DIR/matmul.json|log, and writes
  OUT/gpu_latest.json         {"device", "date", "commit", "matmul_bf16_tflops", "runs": [...]}
  OUT/gpu_kernels_latest.md   zero.cpp's per-kernel table of the profiled step, per workload
then prints a side-by-side table last. A run that failed, timed out, was skipped or wrote a log
without the keys this needs is null in the record with the reason beside it: never a number
that was not measured.

zero.cpp's figures over the window (steps A..B, each logged on its own line, steps_per_print 1):
  tokens/s = sum(window_tokens) / sum(window_seconds)
  MFU      = sum(mfu * peak_flops * window_seconds) / sum(window_seconds) / peak_flops
             (model FLOPs by model/model_flops.h over the bf16 matmul rate measured in the run)
  peak     = the largest memory_bytes.peak_total up to step B (accounted device bytes of the run,
             the analogue of torch.cuda.max_memory_allocated)
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

GIB = float(1 << 30)
ZERO_STEP_KEYS = ("window_steps", "window_seconds", "window_tokens", "peak_flops",
                  "peak_flops_dtype", "mfu", "memory_bytes")


class NotMeasured(Exception):
    """Why a figure is null in the record."""


def last_line(log_path):
    """The last non-empty line of a log (usually the error), trimmed for the record."""
    try:
        with open(log_path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def check_status(dir_path, name):
    """Raises NotMeasured unless DIR/NAME.status says the run exited 0."""
    status_path = os.path.join(dir_path, name + ".status")
    try:
        with open(status_path) as f:
            status = json.load(f)
    except (OSError, ValueError):
        raise NotMeasured("no status file (%s.status): the run never started" % name)
    if "skipped" in status:
        raise NotMeasured(status["skipped"])
    tail = last_line(os.path.join(dir_path, name + ".log"))
    if status.get("rc") in (124, 137):  # timeout's TERM, or the KILL that follows it
        raise NotMeasured("timed out after %s s; last output: %s" % (status.get("limit_s"), tail))
    if status.get("rc") != 0:
        raise NotMeasured("exit code %s; last output: %s" % (status.get("rc"), tail))


def zero_parameters(log_path):
    """N from zero train's first line, `zero train: MODEL (N parameters), data: ...`."""
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.match(r"zero train: \S+ \((\d+) parameters\)", line)
            if m:
                return int(m.group(1))
    return None


def zero_run(dir_path, window):
    check_status(dir_path, "zero")
    first, last = window
    path = os.path.join(dir_path, "zero.jsonl")
    try:
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise NotMeasured("cannot read %s: %s" % (path, e))
    steps = [line for line in lines if "tokens_per_s" in line]  # eval lines have eval_loss only
    for line in steps:
        for key in ZERO_STEP_KEYS:
            if key not in line:
                raise NotMeasured(
                    "zero.jsonl's line for step %s lacks key '%s': this zero binary predates "
                    "the issue-13 log keys (%s); rebuild it" %
                    (line.get("step"), key, ", ".join(ZERO_STEP_KEYS)))
        if "peak_total" not in line["memory_bytes"]:
            raise NotMeasured("zero.jsonl's line for step %s lacks memory_bytes.peak_total"
                              % line.get("step"))
    timed = [line for line in steps if first <= line["step"] <= last]
    covered = set()
    for line in timed:
        begin = line["step"] - line["window_steps"] + 1
        if begin < first:
            raise NotMeasured("the log line for step %d covers steps %d..%d, which start before "
                              "the window: steps_per_print must be 1" % (line["step"], begin,
                                                                       line["step"]))
        covered.update(range(begin, line["step"] + 1))
    if covered != set(range(first, last + 1)):
        missing = sorted(set(range(first, last + 1)) - covered)
        raise NotMeasured("zero.jsonl does not cover steps %s of the window %d..%d"
                          % (missing[:5], first, last))
    seconds = sum(line["window_seconds"] for line in timed)
    tokens = sum(line["window_tokens"] for line in timed)
    peak_flops = timed[-1]["peak_flops"]
    flops = sum(line["mfu"] * line["peak_flops"] * line["window_seconds"] for line in timed)
    per_step = [line["window_seconds"] / line["window_steps"] for line in timed]
    return {
        "tokens_per_s": tokens / seconds,
        "mfu": flops / seconds / peak_flops if peak_flops > 0 else None,
        "flops_per_token": flops / tokens,
        "peak_bytes": max(line["memory_bytes"]["peak_total"]
                          for line in steps if line["step"] <= last),
        "peak_flops": peak_flops,
        "peak_flops_dtype": timed[-1]["peak_flops_dtype"],
        "median_step_seconds": statistics.median(per_step),
        "parameters": zero_parameters(os.path.join(dir_path, "zero.log")),
        "final_loss": timed[-1]["loss"],
    }


def torch_run(dir_path, mode, window):
    name = "torch_" + mode
    check_status(dir_path, name)
    path = os.path.join(dir_path, name + ".json")
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        raise NotMeasured("cannot read %s: %s" % (path, e))
    if result.get("window") != list(window):
        raise NotMeasured("%s timed steps %s, not the window %s" % (path, result.get("window"),
                                                                   list(window)))
    return result


def gib(value):
    return None if value is None else round(value / GIB, 3)


def rounded(value, digits=1):
    return None if value is None else round(value, digits)


def verdict(ratio, zero_peak, torch_peak):
    """Where a workload stands against issue 13's target (>= 1.1x compile, no more memory)."""
    if ratio is None:
        return "not measured"
    memory_ok = zero_peak is not None and torch_peak is not None and zero_peak <= torch_peak
    if ratio >= 1.1:
        return "target met" if memory_ok else "fast enough, but more peak memory than PyTorch"
    if ratio >= 0.8:
        return "0.8-1.1x: resolvable only with the kernel table's account of the remaining time"
    return "below 0.8x compile"


def record_workload(name, dir_path, window):
    run = {"workload": name}
    notes = []
    zero = None
    try:
        zero = zero_run(dir_path, window)
    except NotMeasured as e:
        run["zero_error"] = str(e)
    torch = {}
    for mode in ("compile", "eager"):
        try:
            torch[mode] = torch_run(dir_path, mode, window)
        except NotMeasured as e:
            run["torch_%s_error" % mode] = str(e)
    compile_, eager = torch.get("compile"), torch.get("eager")
    run["zero_tokens_per_s"] = rounded(zero and zero["tokens_per_s"])
    run["torch_compile_tokens_per_s"] = rounded(compile_ and compile_["tokens_per_s"])
    run["torch_eager_tokens_per_s"] = rounded(eager and eager["tokens_per_s"])
    run["zero_peak_gib"] = gib(zero and zero["peak_bytes"])
    run["torch_peak_gib"] = gib(compile_ and compile_["peak_allocated_bytes"])
    run["zero_mfu"] = rounded(zero and zero["mfu"], 4)
    # Extras: the ratios, the other side's MFU by the same FLOP count and rate, the parity
    # checks, and the raw numbers behind the rounded ones.
    ratio = None
    if zero and compile_:
        ratio = zero["tokens_per_s"] / compile_["tokens_per_s"]
    run["zero_vs_compile"] = rounded(ratio, 3)
    if zero and eager:
        run["zero_vs_eager"] = rounded(zero["tokens_per_s"] / eager["tokens_per_s"], 3)
    run["verdict"] = verdict(ratio, zero and zero["peak_bytes"],
                             compile_ and compile_["peak_allocated_bytes"])
    if zero:
        run["zero_peak_flops_dtype"] = zero["peak_flops_dtype"]
        run["zero_matmul_tflops"] = rounded(zero["peak_flops"] / 1e12, 3)
        run["zero_median_step_ms"] = rounded(1e3 * zero["median_step_seconds"], 2)
        run["zero_parameters"] = zero["parameters"]
        run["zero_final_loss"] = rounded(zero["final_loss"], 4)
    for mode, result in torch.items():
        run["torch_%s_peak_reserved_gib" % mode] = gib(result["peak_reserved_bytes"])
        run["torch_%s_median_step_ms" % mode] = rounded(
            1e3 * statistics.median(result["step_seconds"][window[0] - 1:]), 2)
        run["torch_%s_attention" % mode] = result.get("attention")
        if mode == "compile":
            run["torch_compile_graphs"] = result.get("compiled_graphs")
            if result.get("graph_breaks"):
                notes.append("torch.compile had %s graph breaks: Python runs between the "
                             "compiled pieces" % result["graph_breaks"])
        if zero and zero["peak_flops"] > 0:
            # The same FLOPs per token (zero.cpp's count, checked below) over the same rate.
            run["torch_%s_mfu" % mode] = rounded(
                result["tokens_per_s"] * zero["flops_per_token"] / zero["peak_flops"], 4)
        run["torch_parameters"] = result["parameters"]
        if zero:
            torch_flops = result["model_flops_per_step"] / (result["batch"] * result["seq_len"])
            if abs(torch_flops / zero["flops_per_token"] - 1.0) > 0.005:
                notes.append("FLOPs per token differ: zero.cpp %.4g, torch_baseline %.4g"
                             % (zero["flops_per_token"], torch_flops))
    if eager:
        run["torch_eager_peak_gib"] = gib(eager["peak_allocated_bytes"])
    if zero and torch and zero["parameters"] != run["torch_parameters"]:
        notes.append("parameter counts differ: zero.cpp %s, PyTorch %s: not the same model"
                     % (zero["parameters"], run["torch_parameters"]))
    if notes:
        run["warnings"] = sorted(set(notes))
    return run


def kernel_section(name, dir_path, zero_median_ms):
    """The markdown table of one workload's profiled step (or why there is none)."""
    path = os.path.join(dir_path, "zero.kernels.json")
    head = "## %s\n\n" % name
    if not os.path.exists(path):
        return head + "No kernel profile (zero.kernels.json missing: the run failed, or the " \
                      "binary has no --profile-kernels).\n"
    try:
        with open(path) as f:
            prof = json.load(f)
        step_s, kernel_s, kernels = prof["step_seconds"], prof["kernel_seconds"], prof["kernels"]
        rows = [(k["op"], k["shape"], k["dtype"], k["calls"], k["seconds"], k["flops"])
                for k in kernels]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return head + "Unreadable kernel profile %s: %r\n" % (path, e)

    def tflops(flops, seconds):
        return "%.1f" % (flops / seconds / 1e12) if flops and seconds > 0 else ""

    out = [head, "Step %s: %.2f ms; kernels %.2f ms (%.1f%% of the step; the rest is host work "
                 "and gaps between kernels)." % (prof.get("step"), 1e3 * step_s, 1e3 * kernel_s,
                                                  100.0 * kernel_s / step_s)]
    if zero_median_ms:
        out.append(" The timed window's median step: %.2f ms." % zero_median_ms)
    out.append("\n\n| op | shape | dtype | calls | ms | % of step | TFLOP/s |\n"
               "|---|---|---|---:|---:|---:|---:|\n")
    for op, shape, dtype, calls, seconds, flops in rows:
        out.append("| %s | %s | %s | %d | %.3f | %.1f | %s |\n" % (
            op, shape, dtype, calls, 1e3 * seconds, 100.0 * seconds / step_s,
            tflops(flops, seconds)))
    by_op = {}
    for op, _, _, calls, seconds, flops in rows:
        total = by_op.setdefault(op, [0, 0.0, 0.0])
        total[0] += calls
        total[1] += seconds
        total[2] += flops
    out.append("\nBy op:\n\n| op | calls | ms | % of step | TFLOP/s |\n|---|---:|---:|---:|---:|\n")
    for op, (calls, seconds, flops) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        out.append("| %s | %d | %.3f | %.1f | %s |\n" % (
            op, calls, 1e3 * seconds, 100.0 * seconds / step_s, tflops(flops, seconds)))
    return "".join(out)


def device_name(work):
    try:
        with open(os.path.join(work, "nvidia_smi.txt")) as f:
            name = f.readline().split(",")[0].strip()
            if name and "not found" not in name and "failed" not in name.lower():
                return name
    except OSError:
        pass
    return None


def summary_table(record):
    def cell(value, fmt):
        return "n/a" if value is None else fmt % value
    header = "%-22s %11s %11s %11s %8s %9s %9s %8s" % (
        "workload", "zero tok/s", "compile", "eager", "zero/cmp", "zero GiB", "torch GiB",
        "zero MFU")
    lines = [header]
    for run in record["runs"]:
        lines.append("%-22s %11s %11s %11s %8s %9s %9s %8s" % (
            run["workload"], cell(run["zero_tokens_per_s"], "%.0f"),
            cell(run["torch_compile_tokens_per_s"], "%.0f"),
            cell(run["torch_eager_tokens_per_s"], "%.0f"), cell(run["zero_vs_compile"], "%.3f"),
            cell(run["zero_peak_gib"], "%.2f"), cell(run["torch_peak_gib"], "%.2f"),
            cell(run["zero_mfu"], "%.3f")))
    for run in record["runs"]:
        lines.append("%s: %s" % (run["workload"], run["verdict"]))
        for key in sorted(k for k in run if k.endswith("_error")):
            lines.append("  %s: %s" % (key, run[key]))
        for warning in run.get("warnings", []):
            lines.append("  warning: %s" % warning)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True, help="gpu_speed.sh's log directory")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--window", type=int, nargs=2, default=[11, 30], metavar=("FIRST", "LAST"))
    ap.add_argument("--workloads", nargs="+", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--zero-flags", default="")
    ap.add_argument("--date", default=None, help="default: now, UTC")
    args = ap.parse_args()
    window = tuple(args.window)
    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    runs = [record_workload(w, os.path.join(args.work, w), window) for w in args.workloads]
    # The card's bf16 matmul rate as zero.cpp measured it (the MFU denominator), from the first
    # workload that measured one; PyTorch's own measurement beside it as a cross-check.
    bf16_rates = [r["zero_matmul_tflops"] for r in runs if r.get("zero_peak_flops_dtype") == "bf16"]
    torch_rate = None
    try:
        check_status(args.work, "matmul")
        torch_rate = round(json.loads(last_line(os.path.join(args.work, "matmul.log")))
                           ["matmul_bf16_tflops"], 1)
    except (NotMeasured, ValueError, KeyError):
        pass
    devices, torch_versions = [device_name(args.work)], []
    for w in args.workloads:
        for name in ("torch_compile.json", "torch_eager.json"):
            try:
                with open(os.path.join(args.work, w, name)) as f:
                    result = json.load(f)
                devices.append(result.get("device"))
                torch_versions.append(result.get("torch_version"))
            except (OSError, ValueError):
                pass
    record = {
        "device": next((d for d in devices if d), "unknown"),
        "date": date,
        "commit": args.commit,
        "matmul_bf16_tflops": bf16_rates[0] if bf16_rates else None,
        "runs": runs,
        "window_steps": list(window),
        "torch_matmul_bf16_tflops": torch_rate,
        "torch_version": next((v for v in torch_versions if v), None),
        "zero_flags": args.zero_flags,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "gpu_latest.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    sections = [kernel_section(w, os.path.join(args.work, w), r.get("zero_median_step_ms"))
                for w, r in zip(args.workloads, runs)]
    with open(os.path.join(args.out_dir, "gpu_kernels_latest.md"), "w") as f:
        f.write("# zero.cpp per-kernel time\n\n%s, %s, commit %s. One profiled step per "
                "workload (after the timed window), per op and shape, sorted by time; TFLOP/s "
                "for matrix products only.\n\n" % (record["device"], date, args.commit))
        f.write("\n".join(sections))
    print("device %s, %s, commit %s, bf16 matmul %s TFLOP/s (PyTorch's: %s), window %d..%d"
          % (record["device"], date, args.commit, record["matmul_bf16_tflops"], torch_rate,
             window[0], window[1]))
    print(summary_table(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
