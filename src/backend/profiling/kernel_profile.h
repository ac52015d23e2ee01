// The per-kernel time table of one training step (`zero train --profile-kernels STEP`): every
// Backend op the step enqueued, grouped by op, argument shapes and dtype, with its device time
// and the FLOPs it did. It is what the GPU speed work (bench/, issue 13) is led by: where the
// step's time goes, kernel by kernel.
//
// FLOPs follow the MFU convention (model/model_flops.h): matrix products only, 2 FLOPs per
// multiply-add, causal attention counts the score entries it keeps (i >= j, within the window),
// attention backward = 2 x forward (the recomputed scores are not counted). So the table's FLOP
// total is the model FLOPs of the step, and a row's FLOP/s is its share of MFU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::backend {

// One row: every call of one op with the same shapes and dtype.
struct KernelRecord {
  std::string op;     // the Backend method, e.g. "linear_forward"
  std::string shape;  // its arguments' shapes, e.g. "x[16384,768] w[2304,768]"
  std::string dtype;  // the dtype of its main input, e.g. "bf16"
  int64_t calls = 0;
  double seconds = 0.0;  // summed device time of the calls
  double flops = 0.0;    // summed FLOPs of the calls (0 for ops that are not matrix products)
};

struct KernelProfile {
  std::string device;          // e.g. "cuda:0"
  int64_t step = 0;            // the global step profiled (1-based, as step lines count)
  double step_seconds = 0.0;   // wall time of the whole step, host clock
  double kernel_seconds = 0.0; // sum of the rows' seconds
  std::vector<KernelRecord> records;  // by seconds, largest first
};

// Adds one call to `rows` (the row with the same op, shape and dtype, or a new one).
void add_kernel_call(std::vector<KernelRecord>& rows, const std::string& op,
                     const std::string& shape, const std::string& dtype, double seconds,
                     double flops);
// Sorts the rows (seconds descending, then op and shape for a stable order) and sums them.
void finish_kernel_profile(KernelProfile& profile);

// The table as text: rank, op, shape, dtype, calls, ms, % of the step, TFLOP/s; the first
// `max_rows` rows (0: all), then one line for the rest and the totals (kernel time vs step
// time: the difference is host time, waits and launch gaps).
std::string format_kernel_profile(const KernelProfile& profile, size_t max_rows);
// One JSON object: {"device", "step", "step_seconds", "kernel_seconds", "kernels": [{"op",
// "shape", "dtype", "calls", "seconds", "flops"}, ...]} (the rows in table order).
std::string kernel_profile_json(const KernelProfile& profile);

}  // namespace zero::backend
