// Benchmark: text generation on the CPU backend with the key/value cache against the same greedy
// tokens computed without one (a full forward of the whole sequence per token, what generation
// costs when nothing is cached). Prints prefill time, decode tokens/s of both and the ratio, and
// checks the two produced the same tokens.
//
// usage: bench_generation [--model PRESET] [--prompt N] [--new N] [--batch B]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/host_convert.h"
#include "generation/generator.h"
#include "model/transformer_builder.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Greedy tokens by one full forward of the growing sequence per token (no cache).
std::vector<int64_t> uncached_greedy(zero::model::Model& model, std::vector<int64_t> ids,
                                     int64_t new_tokens) {
  std::vector<int64_t> out;
  for (int64_t step = 0; step < new_tokens; ++step) {
    const auto seq = static_cast<int64_t>(ids.size());
    zero::Tensor input = zero::Tensor::zeros_host({1, seq}, zero::DType::kI64);
    std::copy(ids.begin(), ids.end(), input.data<int64_t>());
    zero::model::Batch batch = zero::model::batch_from_input_ids(input);
    zero::Tensor logits;
    zero::model::StepContext ctx{model.backend(), batch};
    ctx.training = false;
    ctx.capture_logits = &logits;
    model.forward(ctx);
    const zero::Tensor wide = zero::converted_host(logits, zero::DType::kF64);
    const int64_t vocab = wide.size(1);
    const double* row = wide.data<double>() + (seq - 1) * vocab;
    const int64_t next = std::max_element(row, row + vocab) - row;
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "gpt2-124m";
  int64_t prompt_tokens = 64, new_tokens = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--prompt")) prompt_tokens = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--new")) new_tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_generation [--model PRESET] [--prompt N] [--new N]\n");
      return 2;
    }
  }
  zero::backend::CpuBackend cpu;
  auto model = zero::model::build_transformer(zero::model::preset_config(preset), cpu,
                                              zero::DType::kF32);
  zero::model::init_parameters(*model, 1);
  model->release_flat_grads();
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    prompt.push_back((i * 7919 + 13) % model->config()->vocab_size);
  }
  zero::generation::Generator generator(*model);
  zero::generation::GenerationOptions options;
  options.max_new_tokens = new_tokens;
  const auto cached = generator.generate(prompt, options)[0].tokens;
  const zero::generation::GenerationStats stats = generator.stats();
  const double cached_rate = static_cast<double>(stats.decode_steps) / stats.decode_seconds;

  const auto start = Clock::now();
  const std::vector<int64_t> uncached = uncached_greedy(*model, prompt, new_tokens);
  const double uncached_seconds = seconds_since(start);
  const double uncached_rate = static_cast<double>(new_tokens) / uncached_seconds;

  std::printf("model %s, prompt %lld tokens, %lld new tokens, greedy, f32, CPU (%d OpenMP "
              "threads)\n", preset.c_str(), static_cast<long long>(prompt_tokens),
              static_cast<long long>(new_tokens), omp_get_max_threads());
  std::printf("with the cache:    prefill %.3f s, decode %.1f tokens/s (cache %.1f MiB)\n",
              stats.prefill_seconds, cached_rate,
              static_cast<double>(stats.cache_bytes) / (1 << 20));
  std::printf("without a cache:   %.1f tokens/s (a full forward per token)\n", uncached_rate);
  std::printf("speedup of decode: %.1fx; same tokens: %s\n", cached_rate / uncached_rate,
              cached == uncached ? "yes" : "NO");
  return cached == uncached ? 0 : 1;
}
