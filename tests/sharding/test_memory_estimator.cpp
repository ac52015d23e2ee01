// sharding::memory_estimator against numbers computed by hand from DeepSpeed's estimator
// formulas (estimate_zero2/zero3_model_states_mem_needs), against the table DeepSpeed prints for
// t5-small, and the activation formula against Megatron's sbh(34 + 5as/h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"

namespace {

using zero::sharding::EstimateShape;
using zero::sharding::ModelStateMemory;
using zero::sharding::OffloadDevice;
using zero::sharding::ZeroOptions;
constexpr OffloadDevice kNone = OffloadDevice::kNone, kCpu = OffloadDevice::kCpu, kNvme = OffloadDevice::kNvme;

ModelStateMemory estimate(const EstimateShape& shape, int stage, OffloadDevice optimizer = kNone,
                          OffloadDevice param = kNone, bool zero_init = true) {
  return zero::sharding::estimate_model_states(shape, ZeroOptions{stage, optimizer, param, zero_init});
}

std::string gb(int64_t bytes) {  // DeepSpeed prints bytes / 2**30 with two decimals
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// The seed example: BLOOM-176B (largest layer: the 250880 x 14336 embedding) on one node of 8.
TEST(MemoryEstimator, Bloom176BOnEightGpus) {
  const EstimateShape shape{176'000'000'000, 250'880LL * 14'336, 8, 1, 1.5};
  const int64_t ll = 4 * 3'596'615'680LL;  // 14'386'462'720
  // ZeRO-3 with optimizer offload (the seed example), params offloaded too and not.
  auto m = estimate(shape, 3, kCpu, kCpu);
  EXPECT_EQ(m.gpu_bytes, ll);
  EXPECT_EQ(m.cpu_bytes, 4'752'000'000'000);  // 176e9 * 18 * 1.5
  EXPECT_EQ(estimate(shape, 3, kCpu, kCpu, false).cpu_bytes, 8'448'000'000'000);  // max(4*8, 18)
  m = estimate(shape, 3, kCpu, kNone);
  EXPECT_EQ(m.gpu_bytes, ll + 44'000'000'000);  // + 2 * 176e9 / 8
  EXPECT_EQ(m.cpu_bytes, 4'224'000'000'000);    // 176e9 * 16 * 1.5
  EXPECT_EQ(estimate(shape, 3, kCpu, kNone, false).cpu_bytes, 8'448'000'000'000);
  m = estimate(shape, 3);
  EXPECT_EQ(m.gpu_bytes, ll + 396'000'000'000);  // + 18 * 176e9 / 8
  EXPECT_EQ(m.cpu_bytes, 172'637'552'640);        // largest * 4 * 8 * 1.5
  EXPECT_EQ(estimate(shape, 3, kNone, kNone, false).cpu_bytes, 8'448'000'000'000);
  EXPECT_EQ(m.nvme_bytes, 0);
  // ZeRO-2.
  m = estimate(shape, 2, kCpu);
  EXPECT_EQ(m.gpu_bytes, 352'000'000'000);        // 2P
  EXPECT_EQ(m.cpu_bytes, 8'448'000'000'000);      // P * max(4*8, 16) * 1.5
  m = estimate(shape, 2);
  EXPECT_EQ(m.gpu_bytes, 748'000'000'000);        // 2P + 18P/8
  EXPECT_EQ(m.cpu_bytes, 8'448'000'000'000);      // 4P * 8 * 1.5
}

// DeepSpeed's documented output for t5-small (60506624 params, largest 32128 x 512) on 1 GPU:
//   1.52GB | 0.06GB | offload_param=cpu,  offload_optimizer=cpu,  zero_init=1 (and =0)
//   1.35GB | 0.17GB | offload_param=none, offload_optimizer=cpu,  zero_init=1 (and =0)
//   0.09GB | 1.08GB | offload_param=none, offload_optimizer=none, zero_init=1
//   0.34GB | 1.08GB | offload_param=none, offload_optimizer=none, zero_init=0
TEST(MemoryEstimator, MatchesDeepSpeedsPrintedT5SmallTable) {
  const EstimateShape shape{60'506'624, 32'128 * 512, 1, 1, 1.5};
  struct Row {
    OffloadDevice optimizer, param;
    bool zero_init;
    int64_t cpu, gpu;
    const char *cpu_gb, *gpu_gb;
  };
  const Row rows[] = {
      {kCpu, kCpu, true, 1'633'678'848, 65'798'144, "1.52", "0.06"},
      {kCpu, kCpu, false, 1'633'678'848, 65'798'144, "1.52", "0.06"},
      {kCpu, kNone, true, 1'452'158'976, 186'811'392, "1.35", "0.17"},
      {kCpu, kNone, false, 1'452'158'976, 186'811'392, "1.35", "0.17"},
      {kNone, kNone, true, 98'697'216, 1'154'917'376, "0.09", "1.08"},
      {kNone, kNone, false, 363'039'744, 1'154'917'376, "0.34", "1.08"},
  };
  for (const Row& r : rows) {
    const auto m = estimate(shape, 3, r.optimizer, r.param, r.zero_init);
    EXPECT_EQ(m.cpu_bytes, r.cpu) << r.cpu_gb;
    EXPECT_EQ(m.gpu_bytes, r.gpu) << r.gpu_gb;
    EXPECT_EQ(gb(m.cpu_bytes), r.cpu_gb);
    EXPECT_EQ(gb(m.gpu_bytes), r.gpu_gb);
  }
}

// Two nodes of 4: gf = 1/2 halves the stage-3 host memory per node; max(4N, 16) and 4 * gpn.
TEST(MemoryEstimator, TwoNodesAllStages) {
  const EstimateShape shape{1'000'000'000, 100'000'000, 4, 2, 1.5};
  auto m = estimate(shape, 3, kCpu, kCpu);
  EXPECT_EQ(m.gpu_bytes, 400'000'000);
  EXPECT_EQ(m.cpu_bytes, 13'500'000'000);  // 1e9 * 18 * 0.5 * 1.5
  EXPECT_EQ(estimate(shape, 3, kCpu, kCpu, false).cpu_bytes, 24'000'000'000);  // max(16, 9)
  m = estimate(shape, 3, kCpu);
  EXPECT_EQ(m.gpu_bytes, 650'000'000);     // 4e8 + 2e9 / 8
  EXPECT_EQ(m.cpu_bytes, 12'000'000'000);  // 1e9 * 16 * 0.5 * 1.5
  m = estimate(shape, 3);
  EXPECT_EQ(m.gpu_bytes, 2'650'000'000);  // 4e8 + 18e9 / 8
  EXPECT_EQ(m.cpu_bytes, 2'400'000'000);  // 1e8 * 4 * 4 * 1.5
  m = estimate(shape, 2, kCpu);
  EXPECT_EQ(m.gpu_bytes, 2'000'000'000);
  EXPECT_EQ(m.cpu_bytes, 48'000'000'000);  // 1e9 * max(32, 16) * 1.5
  m = estimate(shape, 2);
  EXPECT_EQ(m.gpu_bytes, 4'250'000'000);   // 2e9 + 18e9 / 8
  EXPECT_EQ(m.cpu_bytes, 24'000'000'000);  // 4e9 * 4 * 1.5
  // Stages 0 and 1 (derived, see the header): 20P, and 4P + 16P/N.
  EXPECT_EQ(estimate(shape, 1).gpu_bytes, 6'000'000'000);
  EXPECT_EQ(estimate(shape, 1, kCpu).gpu_bytes, 4'000'000'000);
  EXPECT_EQ(estimate(shape, 1, kCpu).cpu_bytes, 48'000'000'000);
  EXPECT_EQ(estimate(shape, 0).gpu_bytes, 20'000'000'000);
  EXPECT_EQ(estimate(shape, 0).cpu_bytes, 24'000'000'000);
  // Few GPUs: the host floor of 16 bytes per parameter wins over 4 * total_gpus.
  const EstimateShape two{1'000'000'000, 0, 2, 1, 1.5};
  EXPECT_EQ(estimate(two, 2, kCpu).cpu_bytes, 24'000'000'000);
}

TEST(MemoryEstimator, StagesAgreeOnOneGpuAndShrinkWithMore) {
  for (int64_t gpus : {1, 2, 8, 64}) {
    const EstimateShape shape{7'000'000'000, 500'000'000, gpus, 1, 1.5};
    const int64_t s0 = estimate(shape, 0).gpu_bytes, s1 = estimate(shape, 1).gpu_bytes,
                  s2 = estimate(shape, 2).gpu_bytes;
    EXPECT_GE(s0, s1) << gpus;
    EXPECT_GE(s1, s2) << gpus;
    if (gpus == 1) {
      EXPECT_EQ(s0, s1);
      EXPECT_EQ(s1, s2);
    }
  }
}

TEST(MemoryEstimator, NvmeKeepsGpuMemoryAndMovesStatesOffTheHost) {
  const EstimateShape shape{1'000'000'000, 100'000'000, 4, 2, 1.5};
  auto m = estimate(shape, 3, kNvme, kNvme);
  EXPECT_EQ(m.gpu_bytes, estimate(shape, 3, kCpu, kCpu).gpu_bytes);
  EXPECT_EQ(m.cpu_bytes, 3'000'000'000);   // (18 - 12 - 2) * 0.5 * 1.5 * 1e9
  EXPECT_EQ(m.nvme_bytes, 7'000'000'000);  // 14 * 0.5 * 1e9
  m = estimate(shape, 3, kNvme);
  EXPECT_EQ(m.gpu_bytes, 650'000'000);
  EXPECT_EQ(m.cpu_bytes, 3'000'000'000);   // (16 - 12) * 0.5 * 1.5 * 1e9
  EXPECT_EQ(m.nvme_bytes, 6'000'000'000);
  m = estimate(shape, 3, kCpu, kNvme);
  EXPECT_EQ(m.cpu_bytes, 12'000'000'000);  // (18 - 2) * 0.5 * 1.5 * 1e9
  EXPECT_EQ(m.nvme_bytes, 1'000'000'000);
  EXPECT_EQ(estimate(shape, 3, kNvme, kNvme, false).cpu_bytes, 24'000'000'000);  // max(16, 2)
}

// Parameters offloaded with the optimizer on the GPU (DeepSpeed has no estimator row; zero.cpp
// runs it): the no-offload GPU figure without the 2 bytes of fp16 parameters, which go to the
// host or to NVMe.
TEST(MemoryEstimator, ParameterOffloadWithTheOptimizerOnTheGpu) {
  const EstimateShape shape{1'000'000'000, 100'000'000, 4, 2, 1.5};
  const ModelStateMemory none = estimate(shape, 3);
  auto m = estimate(shape, 3, kNone, kCpu);
  EXPECT_EQ(m.gpu_bytes, none.gpu_bytes - 2'000'000'000 / 8);
  EXPECT_EQ(m.cpu_bytes, 1'500'000'000);  // 2 * 0.5 * 1.5 * 1e9
  EXPECT_EQ(m.nvme_bytes, 0);
  m = estimate(shape, 3, kNone, kNvme);
  EXPECT_EQ(m.gpu_bytes, none.gpu_bytes - 2'000'000'000 / 8);
  EXPECT_EQ(m.cpu_bytes, 0);
  EXPECT_EQ(m.nvme_bytes, 1'000'000'000);  // 2 * 0.5 * 1e9
  EXPECT_EQ(zero::sharding::estimator_rows(3, kNone, kCpu).size(), 2u);  // zero_init on and off
}

TEST(MemoryEstimator, RejectsCombinationsDeepSpeedCannotRun) {
  const EstimateShape shape{1'000'000'000, 100'000'000, 8, 1, 1.5};
  EXPECT_THROW(estimate(shape, 0, kCpu), zero::ConfigError);
  EXPECT_THROW(estimate(shape, 2, kCpu, kCpu), zero::ConfigError);
  EXPECT_THROW(estimate(shape, 2, kNvme), zero::ConfigError);
  EXPECT_THROW(estimate(shape, 4), zero::ConfigError);
  EXPECT_THROW(estimate(EstimateShape{0, 0, 8, 1, 1.5}, 2), zero::ConfigError);
  EXPECT_THROW(estimate(EstimateShape{100, 200, 8, 1, 1.5}, 3), zero::ConfigError);
  EXPECT_THROW(estimate(EstimateShape{100, 10, 0, 1, 1.5}, 3), zero::ConfigError);
}

TEST(MemoryEstimator, RowsFollowDeepSpeedsListing) {
  using zero::sharding::estimator_rows;
  EXPECT_EQ(estimator_rows(std::nullopt, std::nullopt, std::nullopt).size(), 11u);
  const auto stage3 = estimator_rows(3, std::nullopt, std::nullopt);
  ASSERT_EQ(stage3.size(), 6u);  // DeepSpeed's zero3 table
  EXPECT_EQ(stage3[0].offload_param, kCpu);
  EXPECT_TRUE(stage3[0].zero_init);
  EXPECT_FALSE(stage3[1].zero_init);
  EXPECT_EQ(stage3[5].offload_optimizer, kNone);
  EXPECT_EQ(estimator_rows(3, kCpu, std::nullopt).size(), 4u);
  EXPECT_EQ(estimator_rows(2, std::nullopt, std::nullopt).size(), 2u);
  EXPECT_EQ(estimator_rows(std::nullopt, kNvme, std::nullopt).size(), 6u);  // (nvme, nvme|cpu|none) x zero_init
  for (const auto& o : estimator_rows(std::nullopt, std::nullopt, std::nullopt)) {
    EXPECT_NO_THROW(zero::sharding::validate_options(o));
  }
}

TEST(MemoryEstimator, LargestLayerIsTheEmbedding) {
  EXPECT_EQ(zero::sharding::largest_layer_params(zero::model::preset_config("gpt2-124m")), 50'257 * 768);
  EXPECT_EQ(zero::sharding::largest_layer_params(zero::model::preset_config("llama-1b")), 128'256LL * 2048);
}

// With a stored softmax and dropout, a GPT-2 block is Megatron's sbh(34 + 5as/h) bytes.
TEST(MemoryEstimator, ActivationsMatchMegatronForGpt2) {
  const auto config = zero::model::preset_config("gpt2-124m");
  zero::sharding::ActivationSettings settings;
  settings.micro_batch = 2;
  settings.seq_len = 1024;
  settings.flash_attention = false;
  settings.dropout = true;
  const auto m = zero::sharding::estimate_activations(config, settings);
  const int64_t s = 1024, b = 2, h = 768, a = 12;
  EXPECT_EQ(m.per_layer_bytes, s * b * h * 34 + 5 * a * s * s * b);  // 179'306'496
  EXPECT_EQ(m.layers_bytes, 12 * m.per_layer_bytes);
  EXPECT_EQ(m.logits_bytes, 4 * b * s * 50'257);
}

// Llama-1B, flash attention, no dropout, micro-batch 1 x 2048 (hand-computed, see the header):
// per token 4h + 2h + 2(q + 2kv) + 2q + 2h + 6I = 75776 bytes; + 4 * 32 heads * 2048 of lse.
TEST(MemoryEstimator, ActivationsOfLlamaWithAndWithoutCheckpointing) {
  const auto config = zero::model::preset_config("llama-1b");
  zero::sharding::ActivationSettings settings;
  settings.micro_batch = 1;
  settings.seq_len = 2048;
  auto m = zero::sharding::estimate_activations(config, settings);
  EXPECT_EQ(m.per_layer_bytes, 155'451'392);
  EXPECT_EQ(m.layers_bytes, 16 * 155'451'392LL);
  EXPECT_EQ(m.logits_bytes, 1'050'673'152);  // 4 * 2048 * 128256
  settings.checkpointing = true;
  m = zero::sharding::estimate_activations(config, settings);
  EXPECT_EQ(m.layers_bytes, 16LL * 2 * 2048 * 2048 + 155'451'392);  // block inputs + one block
  // The peak is the LM head's moment: the 16 inputs, y, the normed h and dh, and the logits.
  EXPECT_EQ(m.total_bytes(), 16LL * 2 * 2048 * 2048 + 3LL * 2 * 2048 * 2048 + 1'050'673'152);
  settings.seq_len = 0;
  EXPECT_THROW(zero::sharding::estimate_activations(config, settings), zero::ConfigError);
}

TEST(MemoryEstimator, CheapestFittingPrefersNoOffloadThenLowerStage) {
  using zero::sharding::FitCandidate;
  const std::vector<FitCandidate> rows = {
      {{2, kCpu, kNone, true}, 30, 500},
      {{2, kNone, kNone, true}, 60, 100},
      {{3, kNone, kNone, true}, 40, 10},
      {{3, kCpu, kCpu, true}, 5, 300},
  };
  EXPECT_EQ(zero::sharding::cheapest_fitting(rows, 80, std::nullopt), 1u);  // stage 2, no offload
  EXPECT_EQ(zero::sharding::cheapest_fitting(rows, 50, std::nullopt), 2u);  // stage 3 before offload
  EXPECT_EQ(zero::sharding::cheapest_fitting(rows, 35, std::nullopt), 0u);  // optimizer offload
  EXPECT_EQ(zero::sharding::cheapest_fitting(rows, 35, int64_t{400}), 3u);  // host too small for row 0
  EXPECT_EQ(zero::sharding::cheapest_fitting(rows, 4, std::nullopt), std::nullopt);
  // Among NVMe rows, less offloaded wins even when it needs more GPU memory.
  const std::vector<FitCandidate> nvme = {
      {{3, kNvme, kCpu, true}, 10, 100},
      {{3, kNvme, kNone, true}, 30, 100},
      {{3, kNvme, kNvme, true}, 10, 50},
  };
  EXPECT_EQ(zero::sharding::cheapest_fitting(nvme, 80, std::nullopt), 1u);
  EXPECT_EQ(zero::sharding::cheapest_fitting(nvme, 20, std::nullopt), 0u);
  EXPECT_EQ(zero::sharding::cheapest_fitting(nvme, 20, int64_t{60}), 2u);
  EXPECT_LT(zero::sharding::configuration_cost({3, kCpu, kCpu, true}),
            zero::sharding::configuration_cost({3, kNvme, kNone, true}));
}

}  // namespace
