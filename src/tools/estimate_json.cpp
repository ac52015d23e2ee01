#include "tools/estimate_json.h"

namespace zero::tools {
namespace {

nlohmann::json activations_json(const EstimateRequest& req) {
  const sharding::ActivationSettings& s = req.settings;
  const sharding::ActivationMemory& a = *req.activations;
  return {{"micro_batch", s.micro_batch},
          {"seq_len", s.seq_len},
          {"checkpointing", s.checkpointing},
          {"cpu_checkpointing", s.cpu_checkpointing},
          {"tiled_mlp_shards", a.mlp_shards},
          {"tiled_logits_shards", a.logits_shards},
          {"sequence_parallel", s.sequence_parallel},
          {"per_layer_bytes", a.per_layer_bytes},
          {"layers_bytes", a.layers_bytes},
          {"logits_bytes", a.logits_bytes},
          {"peak_bytes", a.peak_bytes},
          {"host_bytes", a.host_bytes}};
}

nlohmann::json row_json(const EstimateRequest& req, const EstimateRow& r) {
  nlohmann::json row = {
      {"stage", r.options.stage},
      {"offload_optimizer", sharding::offload_device_name(r.options.offload_optimizer)},
      {"offload_param", sharding::offload_device_name(r.options.offload_param)},
      {"gpu_bytes", r.states.gpu_bytes},
      {"cpu_bytes", r.states.cpu_bytes},
      {"nvme_bytes", r.states.nvme_bytes},
      {"gpu_total_bytes", r.gpu_total}};
  if (r.options.stage == 3) row["zero_init"] = r.options.zero_init;
  if (req.gpu_budget_bytes) row["fits"] = row_fits(req, r);
  return row;
}

}  // namespace

nlohmann::json estimate_json(const EstimateRequest& req, const EstimateResult& result) {
  nlohmann::json out;
  out["total_params"] = req.shape.total_params;
  out["largest_layer_params"] = req.shape.largest_layer_params;
  out["gpus_per_node"] = req.shape.gpus_per_node;
  out["nodes"] = req.shape.num_nodes;
  out["additional_buffer_factor"] = req.shape.additional_buffer_factor;
  if (req.mesh.shown) out["mesh"] = mesh_json(req.mesh);
  if (req.activations) {
    out["activations"] = activations_json(req);
    if (req.mesh.shown) out["activations"]["in_flight_bytes"] = result.activation_bytes;
  }
  if (req.wants_longest) out["longest_sequence"] = longest_sequences_json(result.longest);
  out["rows"] = nlohmann::json::array();
  for (const EstimateRow& r : result.rows) out["rows"].push_back(row_json(req, r));
  if (req.gpu_budget_bytes) {
    out["recommended"] = result.pick ? nlohmann::json(*result.pick) : nlohmann::json(nullptr);
  }
  return out;
}

}  // namespace zero::tools
