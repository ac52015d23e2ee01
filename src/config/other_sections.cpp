// The list of recognised-but-unmodelled top-level keys (DeepSpeed 0.19's config.py and
// config-json.md), and what "in use" means for them.
#include "config/other_sections.h"

namespace zero::config {

const std::vector<OtherSection>& other_sections() {
  static const std::vector<OtherSection> sections = {
      {"amp", "Apex AMP mixed precision"},
      {"torch_autocast", "torch.autocast mixed precision"},
      {"expert_parallel", "AutoEP expert parallelism",
       "remove the section (or set \"enabled\": false in it); Mixtral and Qwen3-MoE models train "
       "without it: every rank runs all experts for its tokens and ZeRO stage 3 partitions the "
       "experts"},
      {"sparse_attention", "sparse attention"},
      {"elasticity", "elastic training"},
      {"compression_training", "compression training"},
      {"data_efficiency", "the data efficiency library"},
      {"autotuning", "the autotuner"},
      {"nebula", "Nebula checkpointing"},
      {"datastates", "DataStates checkpointing"},
      {"compile", "DeepCompile"},
      {"hybrid_engine", "the RLHF hybrid engine"},
      {"eigenvalue", "eigenvalue computation"},
      {"progressive_layer_drop", "progressive layer drop"},
      {"quantize_training", "quantized training (MoQ)"},
      {"weight_quantization", "weight quantization"},
      {"comet", "Comet monitoring",
       "it needs a network; remove the section (or set \"enabled\": false in it), and log "
       "offline with the tensorboard or csv_monitor section (or `zero train --log-json FILE`)"},
      {"timers", "DeepSpeed's throughput timers"},
      {"disable_allgather", "disabling the ZeRO all-gather"},
      {"sparse_gradients", "sparse (CSR) gradients"},
      {"graph_harvesting", "CUDA graph harvesting"},
      {"use_data_before_expert_parallelism", "expert-data parallel topology"},
  };
  return sections;
}

std::vector<std::string> other_section_keys() {
  std::vector<std::string> keys;
  for (const OtherSection& section : other_sections()) keys.push_back(section.key);
  return keys;
}

bool other_section_in_use(const nlohmann::json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_object()) {
    if (value.empty()) return false;
    const auto enabled = value.find("enabled");
    return !(enabled != value.end() && enabled->is_boolean() && !enabled->get<bool>());
  }
  return true;
}

}  // namespace zero::config
