#include "sharding/memory_estimator.h"

#include <algorithm>
#include <cmath>

#include "core/checked_math.h"
#include "core/error.h"
#include "sharding/estimate_math.h"

namespace zero::sharding {
namespace {

// Bytes per parameter of the model states, in DeepSpeed's accounting (see the header).
constexpr int64_t kFp16Params = 2;
constexpr int64_t kFp16Grads = 2;
constexpr int64_t kPartitionedStates = 16;  // 4 fp32 grads + 4 fp32 master + 8 Adam moments
constexpr int64_t kAllStates = 18;          // kPartitionedStates + fp16 grads
constexpr int64_t kNvmeOptimizerStates = 12;  // fp32 master + Adam moments
constexpr int64_t kFp32Bytes = 4;

using namespace estimate_math;  // mul, add: overflow-checked

// DeepSpeed computes host bytes in floating point and truncates; so do we, so the numbers match.
int64_t host_bytes(double params, double bytes_per_param, double buffer_factor) {
  const double bytes = params * bytes_per_param * buffer_factor;
  // Converting a double at or past 2^63 to int64 is undefined behaviour.
  if (!(bytes < 9223372036854775808.0)) {
    throw ConfigError(std::string(kWhat) + " is too large: more than 2^63 bytes of host memory");
  }
  return static_cast<int64_t>(bytes);
}

void validate_shape(const EstimateShape& shape) {
  if (shape.total_params <= 0) {
    throw ConfigError("memory estimate: the parameter count must be positive, got " +
                      std::to_string(shape.total_params));
  }
  if (shape.gpus_per_node <= 0 || shape.num_nodes <= 0) {
    throw ConfigError("memory estimate: GPUs per node and nodes must be at least 1, got " +
                      std::to_string(shape.gpus_per_node) + " and " +
                      std::to_string(shape.num_nodes));
  }
  if (shape.largest_layer_params < 0 || shape.largest_layer_params > shape.total_params) {
    throw ConfigError("memory estimate: the largest layer's parameters (" +
                      std::to_string(shape.largest_layer_params) +
                      ") must be between 0 and the total (" + std::to_string(shape.total_params) +
                      ")");
  }
}

ModelStateMemory stage3(const EstimateShape& s, const ZeroOptions& o) {
  const double p = static_cast<double>(s.total_params);
  const double gf = 1.0 / static_cast<double>(s.num_nodes);
  const double gpn = static_cast<double>(s.gpus_per_node);
  const double abf = s.additional_buffer_factor;
  const int64_t n = s.total_gpus();
  const int64_t gathered_layer = mul({kFp32Bytes, s.largest_layer_params});
  ModelStateMemory m;
  if (o.offload_optimizer == OffloadDevice::kNone && o.offload_param != OffloadDevice::kNone) {
    // Parameters offloaded, optimizer on the GPU (no DeepSpeed row): the no-offload figure
    // without the fp16 parameters, which live on the host or NVMe instead.
    m.gpu_bytes = add(gathered_layer, mul({kAllStates - kFp16Params, s.total_params}) / n);
    const bool nvme = o.offload_param == OffloadDevice::kNvme;
    const double on_host = nvme ? 0.0 : static_cast<double>(kFp16Params) * gf;
    m.cpu_bytes = host_bytes(p, o.zero_init ? on_host : std::max(4.0 * gpn, on_host), abf);
    m.nvme_bytes = nvme ? host_bytes(p, static_cast<double>(kFp16Params), gf) : 0;
    return m;
  }
  if (o.offload_optimizer == OffloadDevice::kNone) {
    m.gpu_bytes = add(gathered_layer, mul({kAllStates, s.total_params}) / n);
    m.cpu_bytes = o.zero_init ? host_bytes(static_cast<double>(s.largest_layer_params),
                                           kFp32Bytes * gpn, abf)
                              : host_bytes(p, kFp32Bytes * gpn, abf);
    return m;
  }
  const bool params_offloaded = o.offload_param != OffloadDevice::kNone;
  m.gpu_bytes = params_offloaded ? gathered_layer
                                 : add(gathered_layer, mul({kFp16Params, s.total_params}) / n);
  const int64_t on_host_or_nvme = params_offloaded ? kAllStates : kPartitionedStates;
  int64_t on_nvme = 0;
  if (o.offload_optimizer == OffloadDevice::kNvme) on_nvme += kNvmeOptimizerStates;
  if (o.offload_param == OffloadDevice::kNvme) on_nvme += kFp16Params;
  const double per_param_host = static_cast<double>(on_host_or_nvme - on_nvme) * gf;
  // Without zero_init every process first materialises the whole fp32 model on the host.
  m.cpu_bytes = host_bytes(p, o.zero_init ? per_param_host : std::max(4.0 * gpn, per_param_host),
                           abf);
  m.nvme_bytes = host_bytes(p, static_cast<double>(on_nvme), gf);
  return m;
}

}  // namespace

const char* offload_device_name(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::kNone: return "none";
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
  }
  return "?";
}

void validate_options(const ZeroOptions& o) {
  if (o.stage < 0 || o.stage > 3) {
    throw ConfigError("ZeRO stage must be 0, 1, 2 or 3, got " + std::to_string(o.stage));
  }
  const bool optimizer_offloaded = o.offload_optimizer != OffloadDevice::kNone;
  const bool param_offloaded = o.offload_param != OffloadDevice::kNone;
  if (o.stage == 0 && optimizer_offloaded) {
    throw ConfigError("offload_optimizer needs ZeRO stage 1, 2 or 3 (DeepSpeed rejects it at stage 0)");
  }
  if (o.stage < 3 && param_offloaded) {
    throw ConfigError("offload_param needs ZeRO stage 3 (stages 1 and 2 keep all parameters on the GPU)");
  }
  if (o.stage < 3 && (o.offload_optimizer == OffloadDevice::kNvme)) {
    throw ConfigError("nvme offload needs ZeRO stage 3 (ZeRO-Infinity); use cpu at stage " +
                      std::to_string(o.stage));
  }
}

ModelStateMemory estimate_model_states(const EstimateShape& s, const ZeroOptions& o) {
  validate_shape(s);
  validate_options(o);
  if (o.stage == 3) return stage3(s, o);
  const double p = static_cast<double>(s.total_params);
  const int64_t n = s.total_gpus();
  const double abf = s.additional_buffer_factor;
  ModelStateMemory m;
  // Without offload each process loads the fp32 model on the host before moving it.
  m.cpu_bytes = host_bytes(p, kFp32Bytes * static_cast<double>(s.gpus_per_node), abf);
  if (o.offload_optimizer == OffloadDevice::kCpu) {
    m.gpu_bytes = mul({o.stage == 1 ? kFp16Params + kFp16Grads : kFp16Params, s.total_params});
    m.cpu_bytes = host_bytes(p, static_cast<double>(std::max<int64_t>(4 * n, 16)), abf);
    return m;
  }
  switch (o.stage) {
    case 0: m.gpu_bytes = mul({kFp16Params + kAllStates, s.total_params}); break;
    case 1:
      m.gpu_bytes = add(mul({kFp16Params + kFp16Grads, s.total_params}),
                        mul({kPartitionedStates, s.total_params}) / n);
      break;
    default:
      m.gpu_bytes =
          add(mul({kFp16Params, s.total_params}), mul({kAllStates, s.total_params}) / n);
      break;
  }
  return m;
}

std::vector<ZeroOptions> estimator_rows(std::optional<int> stage,
                                        std::optional<OffloadDevice> offload_optimizer,
                                        std::optional<OffloadDevice> offload_param) {
  using D = OffloadDevice;
  std::vector<ZeroOptions> all;
  // DeepSpeed's order: offload first, then without; zero_init on before off.
  all.push_back({0, D::kNone, D::kNone, true});
  for (int st : {1, 2}) {
    for (D opt : {D::kCpu, D::kNone}) all.push_back({st, opt, D::kNone, true});
  }
  // NVMe rows are listed only when an offload flag asks for nvme, so the default table stays
  // the size of DeepSpeed's.
  const bool want_nvme = offload_optimizer == D::kNvme || offload_param == D::kNvme;
  const std::vector<std::pair<D, D>> stage3_combos =
      want_nvme ? std::vector<std::pair<D, D>>{{D::kNvme, D::kNvme}, {D::kNvme, D::kCpu},
                                                {D::kCpu, D::kNvme},  {D::kNvme, D::kNone}}
                : std::vector<std::pair<D, D>>{{D::kCpu, D::kCpu}, {D::kCpu, D::kNone},
                                                {D::kNone, D::kNone}};
  // Parameters offloaded with the optimizer on the GPU: listed only when asked for.
  std::vector<std::pair<D, D>> combos = stage3_combos;
  if (offload_optimizer == D::kNone && offload_param && *offload_param != D::kNone) {
    combos.emplace_back(D::kNone, *offload_param);
  }
  for (const auto& [opt, param] : combos) {
    for (bool zero_init : {true, false}) all.push_back({3, opt, param, zero_init});
  }
  std::vector<ZeroOptions> rows;
  for (const ZeroOptions& o : all) {
    if (stage && o.stage != *stage) continue;
    if (offload_optimizer && o.offload_optimizer != *offload_optimizer) continue;
    if (offload_param && o.offload_param != *offload_param) continue;
    rows.push_back(o);
  }
  return rows;
}

int configuration_cost(const ZeroOptions& o) {
  // Offloading a state to the host costs a PCIe round trip per step; to NVMe, a slower one.
  auto penalty = [](OffloadDevice d) { return d == OffloadDevice::kNone ? 0 : d == OffloadDevice::kCpu ? 1 : 3; };
  return (penalty(o.offload_optimizer) + penalty(o.offload_param)) * 10 + o.stage;
}

int64_t largest_layer_params(const model::TransformerConfig& c) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  // The modules as Hugging Face builds them: GPT-2 fuses q, k and v into one c_attn module.
  std::vector<int64_t> modules = {mul({c.vocab_size, h}),
                                  add(mul({q, h}), c.attn_out_bias ? h : 0)};
  if (c.learned_positions) modules.push_back(mul({c.max_position_embeddings, h}));
  if (c.family == model::ModelFamily::kGpt2) {
    const int64_t qkv = add(q, mul({2, kv}));
    modules.push_back(add(mul({h, qkv}), c.qkv_bias ? qkv : 0));
  } else {
    modules.push_back(add(mul({h, q}), c.qkv_bias ? q : 0));
  }
  if (c.is_moe()) modules.push_back(mul({c.num_experts, h}));  // the router
  modules.push_back(add(mul({h, inter}), c.mlp_bias ? inter : 0));  // fc / gate / up
  modules.push_back(add(mul({inter, h}), c.mlp_bias ? h : 0));      // down / proj
  return *std::max_element(modules.begin(), modules.end());
}

std::optional<size_t> cheapest_fitting(const std::vector<FitCandidate>& candidates,
                                       int64_t gpu_budget_bytes,
                                       std::optional<int64_t> cpu_budget_bytes) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const FitCandidate& c = candidates[i];
    if (c.gpu_bytes > gpu_budget_bytes) continue;
    if (cpu_budget_bytes && c.cpu_bytes > *cpu_budget_bytes) continue;
    if (!best) {
      best = i;
      continue;
    }
    const FitCandidate& b = candidates[*best];
    const int cost = configuration_cost(c.options), best_cost = configuration_cost(b.options);
    if (cost < best_cost || (cost == best_cost && c.gpu_bytes < b.gpu_bytes) ||
        (cost == best_cost && c.gpu_bytes == b.gpu_bytes && c.cpu_bytes < b.cpu_bytes)) {
      best = i;
    }
  }
  return best;
}

}  // namespace zero::sharding
