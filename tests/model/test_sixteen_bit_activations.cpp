// Activations stored in bf16 / fp16 (what mixed-precision training does): the logits the model
// stores have the 16-bit dtype, and the loss and parameter gradients stay within the 16-bit
// formats' rounding of the f32 model's. Tolerances: bf16 keeps 8 significant bits (relative
// rounding 2^-9 = 2e-3 per stored value), fp16 11 (2^-12 = 2.4e-4); the gradient bound allows
// the dozens of roundings along the forward and backward chain to compound to about 10x that
// (measured: 6e-3 and 7e-4); the mean loss averages the per-token errors down further.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace sixteen_bit_activations_test {

TransformerConfig small(const std::string& family) {
  TransformerConfig c = preset_config(family == "gpt2" ? "tiny" : "tiny-llama");
  c.vocab_size = 64;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = family == "gpt2" ? 4 : 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = 32;
  return c;
}

Batch batch(int64_t vocab) {
  Tensor ids = Tensor::zeros_host({2, 16}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7 + 3) % vocab;
  return batch_from_input_ids(ids);
}

struct Result {
  double loss;
  std::vector<float> grads;
};

Result run(const std::string& family, std::optional<DType> activations) {
  backend::CpuBackend cpu;
  auto model = build_transformer(small(family), cpu, DType::kF32);
  init_parameters(*model, 3);
  model->set_activation_dtype(activations);
  Result r;
  r.loss = model->forward_backward(batch(64));
  const Tensor& g = model->flat_grads();
  r.grads.assign(g.data<float>(), g.data<float>() + g.numel());
  return r;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

TEST(SixteenBitActivations, LossAndGradientsStayWithinTheFormatsRounding) {
  for (const std::string family : {"gpt2", "llama"}) {
    const Result f32 = run(family, std::nullopt);
    for (const auto& [dtype, loss_tol, grad_tol] :
         {std::tuple{DType::kBF16, 1e-3, 2e-2}, std::tuple{DType::kF16, 1e-4, 3e-3}}) {
      const Result r = run(family, dtype);
      const double loss_err = std::abs(r.loss - f32.loss) / f32.loss;
      const double grad_err = relative_l2(r.grads, f32.grads);
      std::printf("%s %s activations: loss rel diff %.2e, gradient rel L2 diff %.2e\n",
                  family.c_str(), dtype_name(dtype), loss_err, grad_err);
      EXPECT_LE(loss_err, loss_tol) << family << " " << dtype_name(dtype);
      EXPECT_LE(grad_err, grad_tol) << family << " " << dtype_name(dtype);
      EXPECT_GT(grad_err, 0.0) << "16-bit activations changed nothing: are they stored in f32?";
    }
  }
}

TEST(SixteenBitActivations, LogitsAreStoredIn16Bits) {
  backend::CpuBackend cpu;
  auto model = build_transformer(small("llama"), cpu, DType::kF32);
  init_parameters(*model, 3);
  model->set_activation_dtype(DType::kBF16);
  Tensor logits;
  const Batch b = batch(64);
  StepContext ctx{cpu, b};
  ctx.training = false;
  ctx.capture_logits = &logits;
  model->forward(ctx);
  EXPECT_EQ(logits.dtype(), DType::kBF16);
}

}  // namespace sixteen_bit_activations_test
}  // namespace zero::model
