// Shared by the tiled-compute tests: small GPT-2 and Llama shapes, batches with ignored
// targets, one training pass of a whole model under a given SequenceTiling, and a relative
// comparison of gradient vectors.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "model/transformer_builder.h"

namespace zero::model::tiling_test {

// "gpt2": LayerNorm, GELU, biases, learned positions, tied embeddings. "llama": RMSNorm, SwiGLU,
// RoPE, grouped KV heads, untied head. Vocabularies larger than the hidden size, as in real
// models, so the logits are the widest activation.
inline TransformerConfig config_for(const std::string& family) {
  TransformerConfig c = preset_config(family == "gpt2" ? "tiny" : "tiny-llama");
  c.vocab_size = family == "gpt2" ? 67 : 71;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = family == "gpt2" ? 2 : 1;
  c.head_dim = 8;
  c.intermediate_size = family == "gpt2" ? 64 : 40;
  c.max_position_embeddings = 32;
  return c;
}

// [batch, seq_len] tokens; targets as Hugging Face shifts them, then ignored at every flat row
// (b * seq_len + t) listed in `ignored`.
inline Batch make_batch(int64_t batch, int64_t seq_len, int64_t vocab,
                        const std::vector<int64_t>& ignored = {}) {
  Tensor ids = Tensor::zeros_host({batch, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 29 + 7) % vocab;
  Batch b = batch_from_input_ids(ids);
  for (int64_t row : ignored) b.targets.data<int64_t>()[row] = kIgnoreIndex;
  return b;
}

inline std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[static_cast<size_t>(i)] = t.dtype() == DType::kF64 ? t.data<double>()[i]
                                                            : static_cast<double>(t.data<float>()[i]);
  }
  return out;
}

// Expects max |a - b| <= tolerance * max |b|: relative to the vector's scale, because single
// gradient elements can be arbitrarily close to zero.
inline void expect_close(const std::vector<double>& a, const std::vector<double>& b,
                         double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  EXPECT_GT(scale, 0.0) << what << ": all zero";
  EXPECT_LE(worst, tolerance * scale) << what << ": max difference " << worst << " at scale "
                                      << scale;
}

struct TiledSetup {
  std::string family = "llama";
  DType params = DType::kF64;
  std::optional<DType> activations;
  SequenceTiling tiling;
  bool checkpointing = false;
  double loss_grad = 1.0;
  bool simulated = false;  // on the simulated device (proves the tiled code device-clean)
};

struct Pass {
  double loss = 0.0;
  std::vector<double> grads;  // the whole flat gradient buffer
  std::vector<double> logits;  // captured by a second, evaluation pass
};

// A device tensor's elements as doubles, through one counted copy to the host.
inline std::vector<double> read_back(backend::Backend& backend, const Tensor& t) {
  Tensor host = Tensor::zeros_host(t.shape(), t.dtype());
  backend.copy_to_host(host.raw_data(), t);
  Tensor as_f64 = Tensor::zeros_host(t.shape(), DType::kF64);
  backend::CpuBackend().copy(as_f64, host);
  return to_doubles(as_f64);
}

inline Pass train_pass(const TiledSetup& s, const Batch& batch) {
  std::unique_ptr<backend::Backend> device;
  if (s.simulated) {
    device = std::make_unique<backend::SimulatedDeviceBackend>();
  } else {
    device = std::make_unique<backend::CpuBackend>();
  }
  backend::Backend& cpu = *device;
  auto model = build_transformer(config_for(s.family), cpu, s.params);
  init_parameters(*model, 5);
  model->set_activation_dtype(s.activations);
  model->set_sequence_tiling(s.tiling);
  model->set_activation_checkpointing(s.checkpointing);
  Pass p;
  p.loss = model->forward_backward(batch, s.loss_grad);
  p.grads = read_back(cpu, model->flat_grads());
  Tensor captured;
  StepContext ctx{cpu, batch};
  ctx.training = false;
  ctx.capture_logits = &captured;
  model->forward(ctx);
  for (const auto& unit : model->units()) unit->release_activations();
  Tensor as_f64 = Tensor::zeros_host(captured.shape(), DType::kF64);
  backend::CpuBackend().copy(as_f64, captured);
  p.logits = to_doubles(as_f64);
  return p;
}

}  // namespace zero::model::tiling_test
