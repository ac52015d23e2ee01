// The text of a flops-profiler report (engine/flops_profiler.h), laid out as DeepSpeed's
// flops_profiler prints it: a summary (sizes, parameters, MACs/FLOPs, latencies, achieved
// FLOP/s), one row per unit with the totals, the top modules per depth, and with `detailed` the
// tree of units and the operations inside them.
//
// Depths: 0 is the model, 1 the units (embedding, block<i>, lm_head), 2 the operations of the
// FLOP formula table inside a unit (model/model_flops.h). Latency is measured per unit only, so
// depth 2 has FLOPs but no latency. As in DeepSpeed, the top-modules lists aggregate modules of
// the same kind at a depth (all transformer blocks together; every block's qkv projection
// together).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/monitor_config.h"
#include "model/model_flops.h"

namespace zero::engine {

// One unit's measurements over the profiled step (every micro-batch of it on this rank).
struct UnitProfile {
  std::string kind;               // Unit::kind(): "embedding", "transformer_block", "lm_head"
  model::UnitFlops flops;         // name, ops, parameters, MACs for the step's batch
  double forward_seconds = 0.0;   // wall clock of the unit's forwards (backend synchronised)
  double backward_seconds = 0.0;  // of its backwards, including an activation-checkpoint recompute
};

// What one profiled step measured on one rank.
struct FlopsProfile {
  std::string model_name = "model";  // depth 0: the HF architecture, e.g. "GPT2LMHeadModel"
  int64_t profile_step = 0;        // DeepSpeed's count: optimizer steps completed before it
  int world_size = 1;
  int sequence_parallel_size = 1;  // data parallel size = world_size / sequence_parallel_size
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t seq_len = 0;
  std::vector<UnitProfile> units;  // in model order
  double iter_seconds = 0.0;       // the whole step: micro-batches, reduction, optimizer

  double params() const;
  double forward_macs() const;
  double forward_flops() const { return 2.0 * forward_macs(); }
  // forward + backward, the same number the MFU figure divides by.
  double training_flops() const { return 3.0 * forward_flops(); }
  double forward_seconds() const;
  double backward_seconds() const;
};

// The report text (ends with a newline). Uses module_depth, top_modules, detailed and
// recompute_fwd_factor from `config`.
std::string format_flops_report(const FlopsProfile& profile,
                                 const config::FlopsProfilerConfig& config);

// DeepSpeed's human-readable numbers: "336.23 M", "6.28 G" (K/M/G/T by powers of 1000),
// seconds as "76.67 ms" / "34.09 us" / "1.25 s", rates as "81.9 GFLOP/s".
std::string format_count(double value);
std::string format_seconds(double seconds);
std::string format_flop_rate(double flops_per_second);

}  // namespace zero::engine
