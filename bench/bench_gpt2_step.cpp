// Benchmark: forward + backward of GPT-2 124M shapes on the CPU backend (default B=4, T=1024,
// f32), printing tokens/s and achieved GFLOP/s next to the sgemm GFLOP/s the same machine gets
// on the model's own matmul shapes in the same run. Target: the step at >= 50% of the
// pure-matmul rate (norms, attention and the rest must not dominate).
//
// usage: bench_gpt2_step [--model PRESET] [--batch B] [--seq-len T] [--steps N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model_flops.h"
#include "model/transformer_builder.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Gemm {
  int64_t m, n, k;  // C[m, n] = A[m, k] B[k, n]
};

// Every matrix product of one training step, by shape: forward y = x W^T, backward
// dx = dy W and dW = dy^T x, for each linear of a block and for the LM head.
std::vector<Gemm> step_gemms(const zero::model::TransformerConfig& c, int64_t rows) {
  const int64_t h = c.hidden_size;
  const int64_t qkv = c.q_dim() + 2 * c.kv_dim();
  const int64_t up = c.mlp == zero::model::MlpKind::kSwiGlu ? 2 * c.intermediate_size : c.intermediate_size;
  struct Linear {
    int64_t in, out;
  };
  std::vector<Linear> block = {{h, qkv}, {c.q_dim(), h}, {h, up}, {c.intermediate_size, h}};
  std::vector<Gemm> gemms;
  auto add_linear = [&](Linear l, int repeat) {
    for (int r = 0; r < repeat; ++r) {
      gemms.push_back({rows, l.out, l.in});  // forward
      gemms.push_back({rows, l.in, l.out});  // dx
      gemms.push_back({l.out, l.in, rows});  // dW
    }
  };
  for (const Linear& l : block) add_linear(l, static_cast<int>(c.num_layers));
  add_linear({h, c.vocab_size}, 1);
  return gemms;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "gpt2-124m";
  int64_t batch = 4, seq_len = 1024, steps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") preset = argv[i + 1];
    else if (flag == "--batch") batch = std::atoll(argv[i + 1]);
    else if (flag == "--seq-len") seq_len = std::atoll(argv[i + 1]);
    else if (flag == "--steps") steps = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  using namespace zero;
  backend::CpuBackend cpu;
  const model::TransformerConfig config = model::preset_config(preset);
  auto net = model::build_transformer(config, cpu, DType::kF32);
  model::init_parameters(*net, 1);
  const int64_t rows = batch * seq_len;

  std::mt19937_64 rng(1);
  Tensor ids = Tensor::zeros_host({batch, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  }
  model::Batch data = model::batch_from_input_ids(ids);

  const std::vector<Gemm> gemms = step_gemms(config, rows);
  const model::StepFlops flops = model::training_flops(config, batch, seq_len);
  const double gemm_flops = flops.matmul;
  const double attention_flops = flops.attention;
  const double step_flops = flops.total();

  net->zero_grad();
  net->forward_backward(data);  // warm-up: first-touch of activations, BLAS buffers
  double best = 1e30, total = 0.0, loss = 0.0;
  for (int64_t s = 0; s < steps; ++s) {
    net->zero_grad();
    const auto t = Clock::now();
    loss = net->forward_backward(data);
    const double dt = seconds_since(t);
    best = std::min(best, dt);
    total += dt;
  }

  // Pure sgemm on the same shapes, through the same backend.
  double gemm_seconds = 0.0;
  for (const Gemm& g : gemms) {
    Tensor a = cpu.zeros({g.m, g.k}, DType::kF32, MemoryCategory::kWorkspace);
    Tensor b = cpu.zeros({g.k, g.n}, DType::kF32, MemoryCategory::kWorkspace);
    Tensor c = cpu.zeros({g.m, g.n}, DType::kF32, MemoryCategory::kWorkspace);
    cpu.fill(a, 0.5);
    cpu.fill(b, 0.25);
    cpu.matmul(c, a, false, b, false, 1.0, 0.0);  // warm
    const auto t = Clock::now();
    cpu.matmul(c, a, false, b, false, 1.0, 0.0);
    gemm_seconds += seconds_since(t);
  }

  const double mean = total / static_cast<double>(steps);
  const double step_gflops = step_flops / best / 1e9;
  const double gemm_gflops = gemm_flops / gemm_seconds / 1e9;
  std::printf("model            %s, %lld parameters, B=%lld T=%lld f32, loss %.4f\n", preset.c_str(),
              static_cast<long long>(config.num_parameters()), static_cast<long long>(batch),
              static_cast<long long>(seq_len), loss);
  std::printf("step time        best %.3f s, mean %.3f s over %lld steps\n", best, mean,
              static_cast<long long>(steps));
  std::printf("tokens/s         %.0f (best step)\n", static_cast<double>(rows) / best);
  std::printf("step FLOPs       %.1f GFLOP (%.1f matmul + %.1f attention)\n", step_flops / 1e9,
              gemm_flops / 1e9, attention_flops / 1e9);
  std::printf("achieved         %.1f GFLOP/s\n", step_gflops);
  std::printf("sgemm same shapes %.1f GFLOP/s (%.3f s for the step's %zu matmuls)\n", gemm_gflops,
              gemm_seconds, gemms.size());
  std::printf("ratio            %.0f%% of the pure-matmul rate (target >= 50%%)\n",
              100.0 * step_gflops / gemm_gflops);
  return 0;
}
