// What `zero estimate` reports, computed from a request: model-state memory per ZeRO row
// (sharding::estimate_model_states on one GPU's share), the GPU total with the activations in
// flight, the fastest row that fits the budgets, whether activation checkpointing would make
// one fit, and the longest sequences that fit. No printing: estimate_table / estimate_json
// render it.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "sharding/memory_estimator.h"
#include "tools/estimate_longest_sequence.h"
#include "tools/estimate_request.h"

namespace zero::tools {

struct EstimateRow {
  sharding::ZeroOptions options;
  sharding::ModelStateMemory states;  // per GPU of the largest stage; host and NVMe per node
  int64_t gpu_total = 0;              // states + the activations in flight, bytes per GPU
};

struct EstimateResult {
  std::vector<EstimateRow> rows;
  // Activations on one GPU: one micro-batch's peak x the micro-batches in flight (0 without).
  int64_t activation_bytes = 0;
  std::optional<size_t> pick;  // the fastest row that fits the budgets (with --gpu-memory)
  // When nothing fits without checkpointing: the row that would with it.
  std::optional<size_t> pick_with_checkpointing;
  // The longest sequences that fit (wants_longest), on the row with the least GPU states, and
  // the search's limit (a learned position table cannot grow past its rows).
  std::vector<LongestSequenceRow> longest;
  int64_t longest_allowed = 0;
};

EstimateResult compute_estimate(const EstimateRequest& request);

// The row with the least GPU states (the first of equals).
size_t least_states(const std::vector<EstimateRow>& rows);

// Whether `row` fits the request's GPU budget and, when given, its host budget.
bool row_fits(const EstimateRequest& request, const EstimateRow& row);

}  // namespace zero::tools
