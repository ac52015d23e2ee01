// Generation through a key/value cache (model/kv_cache.h, Model::next_token_logits): a prompt run
// once and then one token at a time gives, at every position, the logits one full forward of the
// whole sequence gives (itself proven against Hugging Face in test_hf_reference.cpp) - for
// GPT-2's learned positions, Llama's rotary GQA, Qwen2's biases and Mistral's sliding window
// (5 positions, shorter than the sequences here); in f64 to summation order, with 16-bit
// activations to their rounding. A step uploads its ids and reads nothing back; bad calls throw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/host_convert.h"
#include "model/hf_checkpoint.h"
#include "model/hf_fixture_copy.h"
#include "model/kv_cache.h"
#include "model/transformer_builder.h"
#include "support/gradcheck.h"

namespace zero::model {
namespace test_kv_cache {

using testing::hf_fixture;

Tensor random_ids(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed) {
  Tensor ids = Tensor::zeros_host({batch, seq}, DType::kI64);
  uint64_t state = seed;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids.data<int64_t>()[i] = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

// Columns [first, first + count) of [B, T] ids.
Tensor id_columns(const Tensor& ids, int64_t first, int64_t count) {
  Tensor out = Tensor::zeros_host({ids.size(0), count}, DType::kI64);
  for (int64_t b = 0; b < ids.size(0); ++b) {
    for (int64_t t = 0; t < count; ++t) {
      out.data<int64_t>()[b * count + t] = ids.data<int64_t>()[b * ids.size(1) + first + t];
    }
  }
  return out;
}

// Every position's logits [B*T, V] from one forward of the whole sequences, as f64.
Tensor full_logits(Model& model, const Tensor& ids) {
  Batch batch = batch_from_input_ids(ids);
  Tensor logits;
  StepContext ctx{model.backend(), batch};
  ctx.training = false;
  ctx.capture_logits = &logits;
  model.forward(ctx);
  return converted_host(logits, DType::kF64);
}

// max |a - b| / max |b| over the rows of position t of every sequence.
double position_error(const Tensor& full, const Tensor& step, int64_t seq, int64_t t) {
  const int64_t vocab = step.size(1);
  double diff = 0.0, scale = 0.0;
  for (int64_t b = 0; b < step.size(0); ++b) {
    for (int64_t v = 0; v < vocab; ++v) {
      const double want = full.data<double>()[(b * seq + t) * vocab + v];
      const double got = step.data<double>()[b * vocab + v];
      diff = std::max(diff, std::fabs(got - want));
      scale = std::max(scale, std::fabs(want));
    }
  }
  return diff / scale;
}

Tensor host_f64(backend::Backend& be, const Tensor& device_logits) {
  Tensor raw = Tensor::zeros_host(device_logits.shape(), device_logits.dtype());
  be.copy_to_host(raw.raw_data(), device_logits);
  return converted_host(raw, DType::kF64);
}

// Prefill `prompt` positions, then one position at a time; the error of each step's logits
// against the full forward's, the worst over the run.
double worst_cached_error(Model& model, const Tensor& ids, int64_t prompt, DType cache_dtype) {
  const Tensor full = full_logits(model, ids);
  const int64_t seq = ids.size(1);
  KvCache cache(model.backend(), *model.config(), ids.size(0), seq, cache_dtype);
  double worst = 0.0;
  Tensor logits = model.next_token_logits(id_columns(ids, 0, prompt), cache);
  cache.advance(prompt);
  worst = std::max(worst, position_error(full, host_f64(model.backend(), logits), seq, prompt - 1));
  for (int64_t t = prompt; t < seq; ++t) {
    logits = model.next_token_logits(id_columns(ids, t, 1), cache);
    cache.advance(1);
    worst = std::max(worst, position_error(full, host_f64(model.backend(), logits), seq, t));
  }
  return worst;
}

class KvCacheFixtures : public ::testing::TestWithParam<const char*> {};

// f64: the cached path sums attention in another order than the tiled one (seen: <= 1e-15
// relative); 1e-12 leaves a thousandfold margin, while a wrong position, mask or rotary angle
// moves logits by > 1e-3.
TEST_P(KvCacheFixtures, CachedStepsGiveTheFullForwardLogitsInF64) {
  backend::CpuBackend cpu;
  auto model = load_hf_model(hf_fixture(GetParam()), cpu, DType::kF64);
  const Tensor ids = random_ids(2, 14, model->config()->vocab_size, 3);
  for (int64_t prompt : {int64_t{1}, int64_t{6}}) {
    EXPECT_LE(worst_cached_error(*model, ids, prompt, DType::kF64), 1e-12)
        << GetParam() << " prompt " << prompt;
  }
}

// bf16 activations (f32 weights): both paths round every stored activation to bf16 (2^-8
// relative) but attend in different orders, so a value can round the other way and the
// difference grows through two blocks and the head (on these fixtures none did: the logits are
// equal); 1e-2 of the largest logit allows a few such flips. A wrong position or mask moves the
// logits by the order of their own scale.
TEST_P(KvCacheFixtures, CachedStepsTrackTheFullForwardWithBf16Activations) {
  backend::CpuBackend cpu;
  auto model = load_hf_model(hf_fixture(GetParam()), cpu, DType::kF32);
  model->set_activation_dtype(DType::kBF16);
  const Tensor ids = random_ids(2, 12, model->config()->vocab_size, 5);
  EXPECT_LE(worst_cached_error(*model, ids, 4, DType::kBF16), 1e-2) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCacheFixtures,
                         ::testing::Values("tiny-gpt2", "tiny-llama", "tiny-qwen2",
                                           "tiny-mistral"));

// Mixtral's experts route each token on its own, so the cached path (one new row a step) routes
// as the full forward does: f64 logits within 1e-12 (tiny-mixtral's preset shape, random
// weights, a 5-token window shorter than the sequence).
TEST(KvCache, MixtralCachedStepsGiveTheFullForwardLogits) {
  backend::CpuBackend cpu;
  TransformerConfig config = preset_config("tiny-mixtral");
  config.sliding_window = 5;
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 11, 0.2);
  const Tensor ids = random_ids(2, 14, config.vocab_size, 4);
  for (int64_t prompt : {int64_t{1}, int64_t{6}}) {
    EXPECT_LE(worst_cached_error(*model, ids, prompt, DType::kF64), 1e-12) << "prompt " << prompt;
  }
}

// Qwen3 normalises each new token's query and key heads before they are rotated and cached:
// the cached steps give the full forward's f64 logits (1e-12 as above).
// Windows in some layers only (layers 1 and 3 within 5 positions, as Qwen's layer_types may
// say), so each block's cache reads its own window.
TEST(KvCache, Qwen3CachedStepsGiveTheFullForwardLogits) {
  backend::CpuBackend cpu;
  TransformerConfig config = preset_config("tiny-qwen3");
  config.set_attention_windows(5, {0, 1, 0, 1});
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 12, 0.2);
  const Tensor ids = random_ids(2, 14, model->config()->vocab_size, 6);
  for (int64_t prompt : {int64_t{1}, int64_t{6}}) {
    EXPECT_LE(worst_cached_error(*model, ids, prompt, DType::kF64), 1e-12) << "prompt " << prompt;
  }
}

// A prompt run once and replicated to three sequences leaves the same keys and values as the
// prompt run for all three: the next step's logits agree (f64, summation order of a batch of
// one against three: 1e-12), on the CPU and the simulated device.
TEST(KvCache, ReplicatingAOneSequencePromptEqualsRunningItForEverySequence) {
  backend::CpuBackend cpu;
  backend::SimulatedDeviceBackend sim;
  for (backend::Backend* be : {static_cast<backend::Backend*>(&cpu),
                               static_cast<backend::Backend*>(&sim)}) {
    auto model = load_hf_model(hf_fixture("tiny-mistral"), *be, DType::kF64);
    const DType dtype = DType::kF64;
    const TransformerConfig& config = *model->config();
    const Tensor prompt = random_ids(1, 7, config.vocab_size, 4);
    Tensor prompts = Tensor::zeros_host({3, 7}, DType::kI64);
    for (int64_t b = 0; b < 3; ++b) {
      std::copy(prompt.data<int64_t>(), prompt.data<int64_t>() + 7,
                prompts.data<int64_t>() + b * 7);
    }
    const Tensor next = random_ids(3, 1, config.vocab_size, 8);
    KvCache all(*be, config, 3, 10, dtype);
    model->next_token_logits(prompts, all);
    all.advance(7);
    const Tensor want = host_f64(*be, model->next_token_logits(next, all));
    KvCache one(*be, config, 1, 7, dtype);
    model->next_token_logits(prompt, one);
    one.advance(7);
    KvCache replicated(*be, config, 3, 10, dtype);
    replicated.replicate(*be, one);
    EXPECT_EQ(replicated.length(), 7);
    const Tensor got = host_f64(*be, model->next_token_logits(next, replicated));
    double worst = 0.0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      worst = std::max(worst, std::fabs(got.data<double>()[i] - want.data<double>()[i]));
    }
    EXPECT_LE(worst, 1e-12) << be->device().to_string();
    EXPECT_THROW(replicated.replicate(*be, all), ShapeError);  // three sequences, not one
  }
}

TEST(KvCache, ADecodeStepUploadsItsIdsAndReadsNothing) {
  backend::SimulatedDeviceBackend sim;
  auto model = load_hf_model(hf_fixture("tiny-llama"), sim, DType::kF32);
  KvCache cache(sim, *model->config(), 1, 8, DType::kF32);
  const Tensor ids = random_ids(1, 4, model->config()->vocab_size, 1);
  model->next_token_logits(ids, cache);
  cache.advance(4);
  sim.reset_transfer_stats();
  model->next_token_logits(id_columns(ids, 3, 1), cache);
  EXPECT_EQ(sim.transfer_stats().device_to_host_calls, 0);
  EXPECT_EQ(sim.transfer_stats().host_to_device_calls, 1);  // the ids (targets are not read)
}

TEST(KvCache, BadCallsNameTheProblem) {
  backend::CpuBackend cpu;
  auto model = load_hf_model(hf_fixture("tiny-llama"), cpu, DType::kF32);
  const TransformerConfig& config = *model->config();
  const Tensor ids = random_ids(2, 3, config.vocab_size, 2);
  auto message = [](const std::function<void()>& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  KvCache small(cpu, config, 2, 4, DType::kF32);
  EXPECT_NE(message([&] {
              model->next_token_logits(ids, small);
              small.advance(3);
              model->next_token_logits(ids, small);
            }).find("3 new positions after 3 do not fit the cache's 4"),
            std::string::npos);
  KvCache one(cpu, config, 1, 4, DType::kF32);
  EXPECT_NE(message([&] { model->next_token_logits(ids, one); }).find("for a cache of 1 sequences"),
            std::string::npos);
  KvCache bf16(cpu, config, 2, 4, DType::kBF16);
  EXPECT_NE(message([&] { model->next_token_logits(ids, bf16); })
                .find("the cache holds bf16 but the model's activations are f32"),
            std::string::npos);
  Tensor out_of_range = Tensor::zeros_host({2, 1}, DType::kI64);
  out_of_range.data<int64_t>()[1] = config.vocab_size;
  KvCache fresh(cpu, config, 2, 4, DType::kF32);
  EXPECT_NE(message([&] { model->next_token_logits(out_of_range, fresh); }).find("256"),
            std::string::npos);
  EXPECT_THROW(KvCache(cpu, config, 0, 4, DType::kF32), ShapeError);
  EXPECT_THROW(fresh.advance(5), ShapeError);
  EXPECT_THROW(KvCache::bytes_for(config, int64_t{1} << 40, int64_t{1} << 40, DType::kF32),
               ConfigError);
}

}  // namespace test_kv_cache
}  // namespace zero::model
