// Activation checkpointing: recomputing each transformer block's forward in backward gives
// bit-identical losses and gradients (every kernel is deterministic) while the activation
// memory held between forward and backward shrinks to one hidden state per block.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace activation_checkpointing_test {

TransformerConfig config_for(const std::string& family) {
  TransformerConfig c = preset_config(family == "gpt2" ? "tiny" : "tiny-llama");
  c.vocab_size = 64;
  c.hidden_size = 64;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = family == "gpt2" ? 4 : 2;
  c.head_dim = 16;
  c.intermediate_size = 256;
  c.max_position_embeddings = 64;
  return c;
}

Batch batch(int64_t vocab) {
  Tensor ids = Tensor::zeros_host({4, 64}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 13 + 5) % vocab;
  return batch_from_input_ids(ids);
}

struct Pass {
  double loss;
  std::vector<float> grads;
  size_t activation_peak;  // bytes of activations alive at once during the pass
};

Pass run(const std::string& family, bool checkpointing, std::optional<DType> activations) {
  backend::CpuBackend cpu;
  auto model = build_transformer(config_for(family), cpu, DType::kF32);
  init_parameters(*model, 7);
  model->set_activation_checkpointing(checkpointing);
  model->set_activation_dtype(activations);
  const Batch b = batch(64);
  cpu.allocator().reset_peaks();
  const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
  Pass p;
  p.loss = model->forward_backward(b);
  p.activation_peak = cpu.allocator().stats().peak(MemoryCategory::kActivations) - before;
  const Tensor& g = model->flat_grads();
  p.grads.assign(g.data<float>(), g.data<float>() + g.numel());
  return p;
}

TEST(ActivationCheckpointing, SameGradientsBitForBitWithLessMemory) {
  for (const std::string family : {"gpt2", "llama"}) {
    for (std::optional<DType> activations : {std::optional<DType>(), std::optional<DType>(DType::kBF16)}) {
      const Pass full = run(family, false, activations);
      const Pass recomputed = run(family, true, activations);
      const std::string what = family + (activations ? " bf16" : " f32");
      EXPECT_EQ(recomputed.loss, full.loss) << what;
      EXPECT_EQ(recomputed.grads, full.grads) << what;
      std::printf("%s: activation peak %zu bytes without checkpointing, %zu with\n", what.c_str(),
                  full.activation_peak, recomputed.activation_peak);
      // 4 blocks each keep ~a dozen [B*T, C]-sized tensors without checkpointing; with it, one
      // hidden state per block plus one block's intermediates during its backward.
      EXPECT_LT(recomputed.activation_peak, full.activation_peak * 6 / 10) << what;
    }
  }
}

TEST(ActivationCheckpointing, EvaluationIsUnaffected) {
  backend::CpuBackend cpu;
  auto model = build_transformer(config_for("llama"), cpu, DType::kF32);
  init_parameters(*model, 7);
  const Batch b = batch(64);
  const double plain = model->evaluate(b);
  model->set_activation_checkpointing(true);
  EXPECT_EQ(model->evaluate(b), plain);
  // A training pass after evaluation still works (no stale checkpoints).
  EXPECT_EQ(model->forward_backward(b), plain);
}

}  // namespace activation_checkpointing_test
}  // namespace zero::model
