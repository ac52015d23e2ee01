// Shared by the ZeRO tests (single-process and MPI): small models whose sizes do not divide
// by the world size, DeepSpeed-like settings per stage, and batches that depend only on (step,
// global micro-batch index), so a run at N ranks and a run at 1 rank see the same data.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/self_comm.h"
#include "engine/engine.h"
#include "model/transformer_builder.h"

namespace zero::engine::zero_test {

// "gpt2": tied embeddings, LayerNorm, GELU, learned positions. "llama": untied, RMSNorm,
// SwiGLU, RoPE, grouped KV heads. "qwen3": llama's with per-head q/k norms and head_dim 12
// (q/k widths apart from the hidden size), tied; "qwen3_moe": that attention, untied, with 4
// experts, 2 per token, not renormalised. "mixtral": llama's attention with 4 experts, 2 per
// token; "mixtral_balance" adds the routers' load-balancing loss (coefficient 0.02). Odd
// vocabularies make every unit's size awkward for N = 3.
inline model::TransformerConfig small_config(const std::string& family) {
  const bool mixtral = family.starts_with("mixtral");
  const bool qwen3 = family.starts_with("qwen3");
  model::TransformerConfig c = model::preset_config(family == "gpt2"        ? "tiny"
                                                    : mixtral               ? "tiny-mixtral"
                                                    : family == "qwen3_moe" ? "tiny-qwen3-moe"
                                                    : qwen3                 ? "tiny-qwen3"
                                                                            : "tiny-llama");
  if (c.is_moe()) c.num_experts = 4;
  if (family == "mixtral_balance") c.router_aux_loss_coef = 0.02;
  c.vocab_size = family == "gpt2" ? 37 : 41;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = family == "gpt2" ? 4 : 2;
  c.head_dim = qwen3 ? 12 : 8;
  c.intermediate_size = family == "gpt2" ? 128 : 40;
  c.max_position_embeddings = 16;
  return c;
}

inline EngineSettings zero_settings(int stage, int64_t micro, int64_t gas, int world) {
  EngineSettings s;
  s.micro_batch_size = micro;
  s.gradient_accumulation_steps = gas;
  s.train_batch_size = micro * gas * world;
  s.optimizer_type = "AdamW";
  s.optimizer_params = {{"lr", 1e-2}, {"weight_decay", 0.1}};
  s.scheduler_type = "WarmupLR";
  s.scheduler_params = {{"warmup_num_steps", 4}, {"warmup_max_lr", 1e-2}, {"warmup_type", "linear"}};
  s.gradient_clipping = 1.0;
  s.zero.stage = stage;
  // Small buckets so several reduce-scatters and all-gathers happen per step.
  s.zero.reduce_bucket_size = 3000;
  s.zero.allgather_bucket_size = 3000;
  s.zero.stage3_prefetch_bucket_size = 5000;
  s.zero.stage3_param_persistence_threshold = 0;
  return s;
}

inline std::unique_ptr<model::Model> small_model(const std::string& family,
                                                 backend::Backend& backend) {
  auto net = model::build_transformer(small_config(family), backend, DType::kF32);
  model::init_parameters(*net, 11);
  return net;
}

// Micro-batch `index` of global step `step`: `micro` sequences of `seq_len` tokens.
inline model::Batch batch_for(int64_t step, int64_t index, int64_t micro, int64_t seq_len,
                              int64_t vocab) {
  Tensor ids = Tensor::zeros_host({micro, seq_len}, DType::kI64);
  uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step * 1000 + index + 1);
  for (int64_t i = 0; i < micro * seq_len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.data<int64_t>()[i] = static_cast<int64_t>(x % static_cast<uint64_t>(vocab));
  }
  return model::batch_from_input_ids(ids);
}

// A micro-batch source for Engine::train_batch at step `step`: batch_for(step, 0, ...),
// batch_for(step, 1, ...), ... in order.
inline std::function<model::Batch()> step_batches(int64_t step, int64_t micro, int64_t seq_len,
                                                  int64_t vocab) {
  auto index = std::make_shared<int64_t>(0);
  return [=] { return batch_for(step, (*index)++, micro, seq_len, vocab); };
}

// What a one-rank run gives: its step losses and its parameters gathered at the end.
struct TrainedRun {
  std::vector<double> losses;
  std::vector<float> params;
};

// `steps` train_batch steps of a one-rank Engine on `net` (step_batches of the model's
// vocabulary), then its parameters.
inline TrainedRun train_one_rank(std::unique_ptr<model::Model> net, const EngineSettings& settings,
                                 int steps, int64_t seq_len) {
  backend::Backend& backend = net->backend();
  const int64_t vocab = net->config()->vocab_size;
  comm::SelfComm comm(&backend);  // its copies of device tensors go through the backend
  Engine engine(std::move(net), settings, comm);
  TrainedRun r;
  for (int step = 0; step < steps; ++step) {
    r.losses.push_back(engine.train_batch(step_batches(step, settings.micro_batch_size, seq_len, vocab)));
  }
  Tensor full = engine.gather_parameters();
  r.params.resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(r.params.data(), full);
  return r;
}

inline std::vector<float> to_vector(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// One optimizer step at rank `rank` of `world`: this rank's `gas` micro-batches are global
// indices rank*gas + j, so N ranks x 1 micro-step cover what 1 rank x N micro-steps covers.
// Returns this rank's micro-batch losses.
inline std::vector<double> train_step(Engine& engine, int64_t step, int rank, int64_t seq_len) {
  const auto& s = engine.settings();
  std::vector<double> losses;
  for (int64_t j = 0; j < s.gradient_accumulation_steps; ++j) {
    const int64_t index = rank * s.gradient_accumulation_steps + j;
    losses.push_back(engine.forward(
        batch_for(step, index, s.micro_batch_size, seq_len, engine.model().config()->vocab_size)));
    engine.backward();
  }
  engine.step();
  return losses;
}

// `steps` optimizer steps (train_step's micro-batches) of this rank of `comm` on the small
// `family` model, then the gathered parameters: the multi-rank twin of train_one_rank.
inline TrainedRun train_on_ranks(backend::Backend& backend, comm::Comm& comm,
                                 const std::string& family, const EngineSettings& settings,
                                 int steps, int64_t seq_len) {
  Engine engine(small_model(family, backend), settings, comm);
  TrainedRun r;
  for (int step = 0; step < steps; ++step) {
    for (double loss : train_step(engine, step, comm.rank(), seq_len)) r.losses.push_back(loss);
  }
  Tensor full = engine.gather_parameters();
  r.params.resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(r.params.data(), full);
  return r;
}

}  // namespace zero::engine::zero_test
