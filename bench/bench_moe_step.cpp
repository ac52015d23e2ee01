// Benchmark: the cost of Mixtral's expert routing on the CPU backend. Forward + backward of a
// Mixtral-shaped model (E experts of width I, k per token) against a Llama model of the same
// attention whose dense MLP has width k * I - the same matrix-product FLOPs per token - so the
// ratio of their step times is what routing, dispatch, gathers, combines and the smaller
// per-expert products cost. Prints both tokens/s and the ratio (1.0: routing is free).
//
// usage: bench_moe_step [--experts E] [--top-k K] [--expert-width I] [--hidden H]
//                       [--batch B] [--seq-len T] [--steps N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/transformer_builder.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per forward + backward, the mean of `steps` after one warm-up step.
double step_seconds(const zero::model::TransformerConfig& config, int64_t batch, int64_t seq_len,
                    int steps) {
  using namespace zero;
  backend::CpuBackend cpu;
  auto net = model::build_transformer(config, cpu, DType::kF32);
  model::init_parameters(*net, 1);
  Tensor ids = Tensor::zeros_host({batch, seq_len}, DType::kI64);
  std::mt19937_64 rng(2);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  }
  const model::Batch data = model::batch_from_input_ids(ids);
  net->forward_backward(data);  // warm-up
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) net->forward_backward(data);
  return std::chrono::duration<double>(Clock::now() - start).count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t experts = 8, top_k = 2, width = 512, hidden = 256, batch = 4, seq_len = 256;
  int steps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--experts") experts = value;
    else if (flag == "--top-k") top_k = value;
    else if (flag == "--expert-width") width = value;
    else if (flag == "--hidden") hidden = value;
    else if (flag == "--batch") batch = value;
    else if (flag == "--seq-len") seq_len = value;
    else if (flag == "--steps") steps = static_cast<int>(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  zero::model::TransformerConfig dense = zero::model::preset_config("tiny-llama");
  dense.hidden_size = hidden;
  dense.num_heads = 8;
  dense.num_kv_heads = 4;
  dense.head_dim = hidden / 8;
  dense.max_position_embeddings = seq_len;
  dense.intermediate_size = top_k * width;
  zero::model::TransformerConfig moe = dense;
  moe.family = zero::model::ModelFamily::kMixtral;
  moe.architecture = "MixtralForCausalLM";
  moe.num_experts = experts;
  moe.experts_per_token = top_k;
  moe.intermediate_size = width;
  dense.validate("dense");
  moe.validate("moe");
  const double tokens = static_cast<double>(batch * seq_len);
  const double dense_s = step_seconds(dense, batch, seq_len, steps);
  const double moe_s = step_seconds(moe, batch, seq_len, steps);
  std::printf("shape: hidden %lld, %lld layers, B=%lld T=%lld, f32, CPU\n",
              static_cast<long long>(hidden), static_cast<long long>(dense.num_layers),
              static_cast<long long>(batch), static_cast<long long>(seq_len));
  std::printf("dense MLP width %-6lld            %8.0f tokens/s (%.3f s/step)\n",
              static_cast<long long>(top_k * width), tokens / dense_s, dense_s);
  std::printf("%lld experts of %lld, %lld per token  %8.0f tokens/s (%.3f s/step)\n",
              static_cast<long long>(experts), static_cast<long long>(width),
              static_cast<long long>(top_k), tokens / moe_s, moe_s);
  std::printf("MoE step / dense step at equal active FLOPs: %.2f\n", moe_s / dense_s);
  return 0;
}
