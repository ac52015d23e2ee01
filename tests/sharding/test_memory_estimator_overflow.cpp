// The memory estimator's products of sizes (from config.json and flags such as --total-params,
// --micro-batch, --seq-len) are overflow-checked: a ConfigError naming the estimate, never a
// wrapped (negative or tiny) byte count that would make a run look as if it fits.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.h"
#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"

namespace zero::sharding {
namespace {

bool overflow_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return std::string(e.what()).find("too large") != std::string::npos;
  }
  return false;
}

TEST(MemoryEstimatorOverflow, HugeParameterCountsAreErrorsNotWrappedBytes) {
  EstimateShape shape;
  shape.total_params = INT64_MAX / 4;
  shape.largest_layer_params = shape.total_params;
  for (int stage = 0; stage <= 3; ++stage) {
    EXPECT_TRUE(overflow_error([&] { estimate_model_states(shape, {stage}); })) << stage;
  }
  EXPECT_TRUE(overflow_error([&] {
    estimate_model_states(shape, {3, OffloadDevice::kCpu, OffloadDevice::kCpu, false});
  }));
  shape.total_params = int64_t{1} << 40;  // a trillion parameters: large but countable
  shape.largest_layer_params = int64_t{1} << 30;
  EXPECT_EQ(estimate_model_states(shape, {0}).gpu_bytes, 20 * (int64_t{1} << 40));
}

TEST(MemoryEstimatorOverflow, HugeMicroBatchOrSequenceLengthIsAnError) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{
           {int64_t{1} << 50, 1024}, {1, int64_t{1} << 50}, {INT64_MAX, INT64_MAX}}) {
    ActivationSettings settings;
    settings.micro_batch = batch;
    settings.seq_len = seq;
    EXPECT_TRUE(overflow_error([&] { estimate_activations(config, settings); }))
        << batch << " x " << seq;
    settings.flash_attention = false;  // seq^2 softmax scores
    EXPECT_TRUE(overflow_error([&] { estimate_activations(config, settings); }));
  }
}

TEST(MemoryEstimatorOverflow, OrdinarySizesAreUnchanged) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  ActivationSettings settings;
  settings.micro_batch = 8;
  settings.seq_len = 1024;
  const ActivationMemory m = estimate_activations(config, settings);
  EXPECT_EQ(m.logits_bytes, int64_t{4} * 8 * 1024 * 50257);
  EXPECT_GT(m.layers_bytes, 0);
}

}  // namespace
}  // namespace zero::sharding
