// Generator (generation/generator.h) on the Hugging Face fixtures: greedy generation with the
// cache equals the argmax chain of full forwards without one (the oracle: every step re-runs the
// whole sequence), stop tokens end a sequence, several sequences sample independently, and bad
// requests are errors that name the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/host_convert.h"
#include "generation/generator.h"
#include "generation/inference_weights.h"
#include "model/hf_checkpoint.h"
#include "model/kv_cache.h"

namespace zero::generation {
namespace test_generator {

std::string fixture(const std::string& folder) {
  return std::string(ZERO_TEST_FIXTURES) + "/hf/" + folder;
}

// The next token by a full forward of `ids` (no cache): the argmax of the last position's logits.
int64_t full_forward_argmax(model::Model& model, const std::vector<int64_t>& ids) {
  const auto seq = static_cast<int64_t>(ids.size());
  Tensor input = Tensor::zeros_host({1, seq}, DType::kI64);
  std::copy(ids.begin(), ids.end(), input.data<int64_t>());
  model::Batch batch = model::batch_from_input_ids(input);
  Tensor logits;
  model::StepContext ctx{model.backend(), batch};
  ctx.training = false;
  ctx.capture_logits = &logits;
  model.forward(ctx);
  const Tensor wide = converted_host(logits, DType::kF64);
  const int64_t vocab = wide.size(1);
  const double* row = wide.data<double>() + (seq - 1) * vocab;
  return std::max_element(row, row + vocab) - row;
}

class GreedyOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(GreedyOracle, CachedGreedyGenerationEqualsFullForwardArgmaxes) {
  backend::CpuBackend cpu;
  auto model = model::load_hf_model(fixture(GetParam()), cpu, DType::kF64);
  const std::vector<int64_t> prompt{5, 17, 200, 3, 99, 41, 7};
  GenerationOptions options;
  options.max_new_tokens = 12;
  Generator generator(*model);
  const std::vector<GeneratedSequence> out = generator.generate(prompt, options);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].tokens.size(), 12u);
  EXPECT_FALSE(out[0].stopped);
  std::vector<int64_t> ids = prompt;
  for (size_t i = 0; i < out[0].tokens.size(); ++i) {
    const int64_t expected = full_forward_argmax(*model, ids);
    ASSERT_EQ(out[0].tokens[i], expected) << GetParam() << " token " << i;
    ids.push_back(expected);
  }
  const GenerationStats& stats = generator.stats();
  EXPECT_EQ(stats.prompt_tokens, 7);
  EXPECT_EQ(stats.generated_tokens, 12);
  EXPECT_EQ(stats.decode_steps, 11);
  EXPECT_EQ(stats.cache_bytes, model::KvCache::bytes_for(*model->config(), 1, 18, DType::kF64));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyOracle,
                         ::testing::Values("tiny-gpt2", "tiny-llama", "tiny-mistral"));

TEST(Generator, AStopTokenEndsItsSequence) {
  backend::CpuBackend cpu;
  auto model = model::load_hf_model(fixture("tiny-llama"), cpu, DType::kF32);
  Generator generator(*model);
  const std::vector<int64_t> prompt{1, 30, 31, 32};
  GenerationOptions options;
  options.max_new_tokens = 10;
  const std::vector<int64_t> free_run = generator.generate(prompt, options)[0].tokens;
  ASSERT_EQ(free_run.size(), 10u);
  const int64_t stop = free_run[3];
  const size_t first = static_cast<size_t>(std::find(free_run.begin(), free_run.end(), stop) -
                                           free_run.begin());
  options.stop_token_ids = {9999, stop};
  const GeneratedSequence stopped = generator.generate(prompt, options)[0];
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.tokens,
            std::vector<int64_t>(free_run.begin(), free_run.begin() + first + 1));
  EXPECT_EQ(generator.stats().generated_tokens, static_cast<int64_t>(first + 1));
}

TEST(Generator, SequencesSampleIndependentlyAndRepeatably) {
  backend::CpuBackend cpu;
  auto model = model::load_hf_model(fixture("tiny-llama"), cpu, DType::kF64);
  Generator generator(*model);
  GenerationOptions options;
  options.max_new_tokens = 8;
  options.sampling.greedy = false;
  options.sampling.seed = 7;
  options.sampling.top_k = 0;
  const std::vector<int64_t> prompt{4, 8, 15, 16};
  const std::vector<int64_t> alone = generator.generate(prompt, options)[0].tokens;
  EXPECT_EQ(generator.generate(prompt, options)[0].tokens, alone);  // same seed, same tokens
  options.num_sequences = 3;
  const std::vector<GeneratedSequence> three = generator.generate(prompt, options);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].tokens, alone);
  EXPECT_NE(three[1].tokens, three[0].tokens);
  EXPECT_NE(three[2].tokens, three[1].tokens);
  EXPECT_EQ(generator.stats().generated_tokens, 24);
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Generator, BadRequestsNameTheFix) {
  backend::CpuBackend cpu;
  auto llama = model::load_hf_model(fixture("tiny-llama"), cpu, DType::kF32);  // 64 positions
  auto gpt2 = model::load_hf_model(fixture("tiny-gpt2"), cpu, DType::kF32);
  Generator rotary(*llama);
  Generator learned(*gpt2);
  GenerationOptions options;
  options.max_new_tokens = 60;
  const std::vector<int64_t> prompt(10, 3);
  EXPECT_NE(error_of([&] { rotary.generate(prompt, options); })
                .find("need 69 positions, past the model's 64 (max_position_embeddings); lower "
                      "--max-new-tokens or shorten the prompt, or pass --allow-long-sequences"),
            std::string::npos);
  const int64_t learned_positions = gpt2->config()->max_position_embeddings;
  options.max_new_tokens = learned_positions;
  EXPECT_EQ(error_of([&] { learned.generate(prompt, options); }).find("--allow-long-sequences"),
            std::string::npos);
  options.allow_long_sequences = true;
  EXPECT_THROW(learned.generate(prompt, options), ConfigError);  // learned tables cannot grow
  options.max_new_tokens = 60;
  EXPECT_EQ(rotary.generate(prompt, options)[0].tokens.size(), 60u);  // rotary ones can
  options.num_sequences = int64_t{1} << 30;  // a cache of ~38 TB: refused before allocating
  EXPECT_NE(error_of([&] { rotary.generate(prompt, options); })
                .find("are in use; lower --max-new-tokens or --num-sequences"),
            std::string::npos);
  options = GenerationOptions{};
  EXPECT_NE(error_of([&] { rotary.generate({}, options); }).find("no tokens"), std::string::npos);
  EXPECT_NE(error_of([&] { rotary.generate({1, 256}, options); })
                .find("prompt token 1 is id 256, outside the model's vocabulary of 256"),
            std::string::npos);
  options.max_new_tokens = 0;
  EXPECT_NE(error_of([&] { rotary.generate({1}, options); }).find("--max-new-tokens must be"),
            std::string::npos);
  options.max_new_tokens = int64_t{1} << 62;
  EXPECT_THROW(rotary.generate({1}, options), ConfigError);
  options.max_new_tokens = 4;
  options.num_sequences = 0;
  EXPECT_THROW(rotary.generate({1}, options), ConfigError);
}

}  // namespace test_generator
}  // namespace zero::generation

namespace zero::generation {
namespace test_generator {

// Inference models carry no gradient buffer, and a device backend holds 16-bit weights as they
// were loaded (no f32 copy); the CPU keeps f32 storage for 16-bit runs.
TEST(InferenceWeights, NoGradientsAndSixteenBitWeightsOnADevice) {
  backend::SimulatedDeviceBackend sim;
  EXPECT_EQ(inference_storage_dtype(sim, DType::kBF16), DType::kBF16);
  auto model = model::load_hf_model_for_inference(fixture("tiny-llama"), sim, DType::kBF16);
  EXPECT_EQ(model->param_dtype(), DType::kBF16);
  EXPECT_FALSE(model->flat_grads().defined());
  const MemoryStats memory = sim.allocator().stats();
  EXPECT_EQ(memory.live(MemoryCategory::kGrads), 0u);
  EXPECT_LE(memory.live(MemoryCategory::kParams),
            static_cast<size_t>(model->num_parameters()) * 2 + 4096);
  prepare_inference_weights(*model, DType::kBF16);
  EXPECT_EQ(model->activation_dtype(), DType::kBF16);
  EXPECT_THROW(prepare_inference_weights(*model, DType::kF32), ConfigError);
  backend::CpuBackend cpu;
  EXPECT_EQ(inference_storage_dtype(cpu, DType::kBF16), DType::kF32);
  EXPECT_EQ(inference_storage_dtype(cpu, DType::kF64), DType::kF64);
}

}  // namespace test_generator
}  // namespace zero::generation
