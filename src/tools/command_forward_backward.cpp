// `zero forward-backward`: one forward and backward pass of a model on a random batch, printing
// the loss, the gradient norm, the time and the memory by category. It is also what `zero` runs
// with no arguments (on the built-in tiny model) until the training loop lands.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {
namespace {

// Stated limits for the random batch: batch x seq_len tokens then always fit an int64 count
// (2^20 x 2^31), and memory, not arithmetic, is what stops a run that is too big.
constexpr int64_t kMaxBatch = int64_t{1} << 20;
constexpr int64_t kMaxProbeSeqLen = (int64_t{1} << 31) - 1;

}  // namespace

int run_forward_backward(const Args& args) {
  ArgParser parser("forward-backward", args);
  parser.option("model", "tiny", "a built-in preset (tiny, tiny-llama, gpt2-124m, ...) or a Hugging Face model folder")
      .option("batch", "4", "sequences per batch")
      .option("seq-len", "64", "tokens per sequence")
      .option("dtype", "f32", "parameter and activation dtype: f32 or f64")
      .option("seed", "1", "seed for the weights (presets) and the random tokens");
  if (!parser.parse()) return 0;
  const std::string model_arg = parser.get("model");
  const int64_t batch = parser.get_int("batch");
  const int64_t seq_len = parser.get_int("seq-len");
  const auto seed = static_cast<uint64_t>(parser.get_int("seed"));
  if (batch < 1 || batch > kMaxBatch) {
    throw ConfigError("zero forward-backward: --batch must be from 1 to " + std::to_string(kMaxBatch) +
                      ", got " + std::to_string(batch));
  }
  if (seq_len < 2 || seq_len > kMaxProbeSeqLen) {
    throw ConfigError("zero forward-backward: --seq-len must be from 2 to " +
                      std::to_string(kMaxProbeSeqLen) + ", got " + std::to_string(seq_len));
  }
  const DType dtype = parse_dtype(parser.get("dtype"), "--dtype");
  if (dtype != DType::kF32 && dtype != DType::kF64) {
    throw ConfigError("zero forward-backward: --dtype must be f32 or f64 on the CPU backend");
  }

  backend::CpuBackend cpu;
  std::unique_ptr<model::Model> model;
  if (std::filesystem::is_directory(model_arg)) {
    model = model::load_hf_model(model_arg, cpu, dtype);
  } else {
    model = model::build_transformer(model::preset_config(model_arg), cpu, dtype);
    model::init_parameters(*model, seed);
  }
  const model::TransformerConfig& config = *model->config();
  if (config.learned_positions && seq_len > config.max_position_embeddings) {
    throw ConfigError("zero forward-backward: --seq-len " + std::to_string(seq_len) +
                      " exceeds the model's " + std::to_string(config.max_position_embeddings) +
                      " positions");
  }

  std::mt19937_64 rng(seed);
  Tensor ids = Tensor::zeros_host({batch, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  }
  model::Batch data = model::batch_from_input_ids(ids);

  model->zero_grad();
  const auto start = std::chrono::steady_clock::now();
  const double loss = model->forward_backward(data);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Tensor grads = converted_host(model->flat_grads(), DType::kF64);
  double sum_squares = 0.0;
  for (int64_t i = 0; i < grads.numel(); ++i) sum_squares += grads.data<double>()[i] * grads.data<double>()[i];

  std::printf("model      %s (%s, %lld layers, hidden %lld, %lld parameters, %s)\n", model_arg.c_str(),
              config.architecture.c_str(), static_cast<long long>(config.num_layers),
              static_cast<long long>(config.hidden_size),
              static_cast<long long>(config.num_parameters()), dtype_name(dtype));
  std::printf("batch      %lld x %lld random tokens (seed %llu)\n", static_cast<long long>(batch),
              static_cast<long long>(seq_len), static_cast<unsigned long long>(seed));
  std::printf("loss       %.6f  (a fresh model on uniform tokens sits near ln(vocab) = %.6f)\n", loss,
              std::log(static_cast<double>(config.vocab_size)));
  std::printf("grad norm  %.6f\n", std::sqrt(sum_squares));
  std::printf("time       %.3f s forward+backward, %.0f tokens/s\n", seconds,
              static_cast<double>(batch * seq_len) / seconds);
  const MemoryStats mem = cpu.allocator().stats();
  std::printf("memory     peak %.1f MiB:", static_cast<double>(mem.total_peak_bytes) / (1 << 20));
  for (size_t c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (mem.peak(category) == 0) continue;
    std::printf(" %s %.1f", memory_category_name(category), static_cast<double>(mem.peak(category)) / (1 << 20));
  }
  std::printf("\n");
  if (!std::isfinite(loss)) throw Error("the loss is not finite");
  return 0;
}

}  // namespace zero::tools
