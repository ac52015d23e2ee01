// Generation on the CUDA backend (the simulator in CI, a GPU under scripts/gpu_check.sh): the
// greedy tokens of the Hugging Face fixtures equal the CPU oracle's in f32 (the logits agree to
// f32 summation order, far inside the gap between the best and second-best logit of these runs),
// each generated token costs one device read; with bf16 weights and activations, the logits of
// every cached step (the CPU's tokens fed back) track the CPU's bf16 run. The cache writes,
// cached attention and last-row gather run as kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/host_convert.h"
#include "generation/generator.h"
#include "generation/inference_weights.h"
#include "model/hf_checkpoint.h"
#include "model/kv_cache.h"

namespace zero::generation {
namespace test_cuda_generation {

// The fixtures, where scripts/gpu_check.sh's bundle put them (ZERO_TEST_FIXTURES) or in the tree.
std::string fixture(const std::string& folder) {
  const char* moved = std::getenv("ZERO_TEST_FIXTURES");
  return std::string(moved != nullptr ? moved : ZERO_TEST_FIXTURES) + "/hf/" + folder;
}

std::vector<int64_t> greedy_tokens(backend::Backend& backend, const std::string& folder,
                                   DType dtype, int64_t* reads_per_step = nullptr) {
  auto model = model::load_hf_model(fixture(folder), backend, DType::kF32);
  prepare_inference_weights(*model, dtype);
  Generator generator(*model);
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.num_sequences = 2;
  backend.reset_transfer_stats();
  const auto out = generator.generate({3, 14, 15, 92, 65, 35}, options);
  if (reads_per_step != nullptr) {
    *reads_per_step = backend.transfer_stats().device_to_host_calls / options.max_new_tokens;
  }
  EXPECT_EQ(out[0].tokens, out[1].tokens) << "greedy sequences of one prompt differ";
  return out[0].tokens;
}

// The logits [B, V] of every step as f64 rows: the prompt, then each of `fed` one at a time.
std::vector<std::vector<double>> step_logits(backend::Backend& backend, const std::string& folder,
                                             DType dtype, const std::vector<int64_t>& prompt,
                                             const std::vector<int64_t>& fed) {
  auto model = model::load_hf_model(fixture(folder), backend, DType::kF32);
  prepare_inference_weights(*model, dtype);
  model::KvCache cache(backend, *model->config(), 1,
                       static_cast<int64_t>(prompt.size() + fed.size()), dtype);
  std::vector<std::vector<double>> out;
  auto run = [&](const std::vector<int64_t>& ids) {
    Tensor tokens = Tensor::zeros_host({1, static_cast<int64_t>(ids.size())}, DType::kI64);
    std::copy(ids.begin(), ids.end(), tokens.data<int64_t>());
    const Tensor logits = model->next_token_logits(tokens, cache);
    cache.advance(tokens.size(1));
    Tensor raw = Tensor::zeros_host(logits.shape(), logits.dtype());
    backend.copy_to_host(raw.raw_data(), logits);
    const Tensor wide = converted_host(raw, DType::kF64);
    out.emplace_back(wide.data<double>(), wide.data<double>() + wide.numel());
  };
  run(prompt);
  for (int64_t id : fed) run({id});
  return out;
}

class CudaGeneration : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaGeneration, GreedyTokensMatchTheCpu) {
  backend::CpuBackend cpu;
  backend::CudaBackend gpu(0);
  int64_t reads = 0;
  const std::vector<int64_t> expected = greedy_tokens(cpu, GetParam(), DType::kF32);
  EXPECT_EQ(greedy_tokens(gpu, GetParam(), DType::kF32, &reads), expected) << GetParam();
  EXPECT_EQ(reads, 1) << "device reads per generated token";
}

// bf16: both backends round every stored activation to bf16 but accumulate products in other
// orders (cuBLASLt's tiles), so a value may round the other way and the difference grows
// through two blocks and the head: 3e-2 of the largest logit. A wrong cache position, mask or
// rotary angle moves the logits by the order of their own scale.
TEST_P(CudaGeneration, Bf16StepLogitsTrackTheCpu) {
  backend::CpuBackend cpu;
  backend::CudaBackend gpu(0);
  const std::vector<int64_t> prompt{3, 14, 15, 92, 65, 35};
  const std::vector<int64_t> fed = greedy_tokens(cpu, GetParam(), DType::kBF16);
  const auto want = step_logits(cpu, GetParam(), DType::kBF16, prompt, fed);
  const auto got = step_logits(gpu, GetParam(), DType::kBF16, prompt, fed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t step = 0; step < want.size(); ++step) {
    double scale = 0.0, diff = 0.0;
    for (size_t v = 0; v < want[step].size(); ++v) {
      scale = std::max(scale, std::fabs(want[step][v]));
      diff = std::max(diff, std::fabs(got[step][v] - want[step][v]));
    }
    EXPECT_LE(diff, 3e-2 * scale) << GetParam() << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGeneration,
                         ::testing::Values("tiny-gpt2", "tiny-llama", "tiny-mistral"));

}  // namespace test_cuda_generation
}  // namespace zero::generation
