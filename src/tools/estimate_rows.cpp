#include "tools/estimate_rows.h"

#include <algorithm>

#include "core/checked_math.h"
#include "tools/estimate_flag_values.h"

namespace zero::tools {
namespace {

const char* const kWhat = "the activations in flight";

// When nothing fits without checkpointing, which row would with it.
std::optional<size_t> pick_with_checkpointing(const EstimateRequest& req,
                                              const EstimateResult& result) {
  sharding::ActivationSettings with = req.settings;
  with.checkpointing = true;
  const auto act = sharding::estimate_activations(*req.mesh.stage, with);
  const int64_t in_flight = checked_product({act.total_bytes(), req.mesh.in_flight}, kWhat);
  std::vector<sharding::FitCandidate> again;
  for (const EstimateRow& r : result.rows) {
    again.push_back({r.options, r.states.gpu_bytes + in_flight, r.states.cpu_bytes});
  }
  return sharding::cheapest_fitting(again, *req.gpu_budget_bytes, req.cpu_budget_bytes);
}

// The longest sequence per option set, on the states of the row that leaves the most room.
// With micro-batches in flight (a pipeline) each holds its activations: the room left after the
// states is shared among them.
std::vector<LongestSequenceRow> longest_rows(const EstimateRequest& req,
                                             const EstimateResult& result) {
  const int64_t states = result.rows[least_states(result.rows)].states.gpu_bytes;
  int64_t budget = *req.gpu_budget_bytes;
  if (req.mesh.in_flight > 1 && budget > states) {
    budget = states + (budget - states) / req.mesh.in_flight;
  }
  return longest_sequences(*req.mesh.stage, req.settings, states, budget,
                           result.longest_allowed);
}

}  // namespace

size_t least_states(const std::vector<EstimateRow>& rows) {
  size_t least = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].states.gpu_bytes < rows[least].states.gpu_bytes) least = i;
  }
  return least;
}

bool row_fits(const EstimateRequest& req, const EstimateRow& r) {
  return req.gpu_budget_bytes && r.gpu_total <= *req.gpu_budget_bytes &&
         (!req.cpu_budget_bytes || r.states.cpu_bytes <= *req.cpu_budget_bytes);
}

EstimateResult compute_estimate(const EstimateRequest& req) {
  EstimateResult result;
  if (req.activations) {
    result.activation_bytes =
        checked_product({req.activations->total_bytes(), req.mesh.in_flight}, kWhat);
  }
  std::vector<sharding::FitCandidate> candidates;
  for (const auto& o : req.options) {
    EstimateRow r{o, sharding::estimate_model_states(req.mesh.states_shape, o), 0};
    r.gpu_total = r.states.gpu_bytes + result.activation_bytes;
    result.rows.push_back(r);
    candidates.push_back({o, r.gpu_total, r.states.cpu_bytes});
  }
  if (req.gpu_budget_bytes) {
    result.pick =
        sharding::cheapest_fitting(candidates, *req.gpu_budget_bytes, req.cpu_budget_bytes);
  }
  if (req.gpu_budget_bytes && !result.pick && req.activations && !req.settings.checkpointing) {
    result.pick_with_checkpointing = pick_with_checkpointing(req, result);
  }
  // A learned position table (GPT-2) has exactly max_position_embeddings rows: no longer
  // sequence can run whatever the memory; rotary positions extend (zero train needs
  // --allow-long-sequences true past max_position_embeddings).
  result.longest_allowed =
      req.config && req.config->learned_positions
          ? std::min(kMaxEstimateSeqLen, req.config->max_position_embeddings)
          : kMaxEstimateSeqLen;
  if (req.wants_longest) result.longest = longest_rows(req, result);
  return result;
}

}  // namespace zero::tools
