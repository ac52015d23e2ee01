// mpi-ranks: 2 4
// The activation estimate under tensor parallelism (sharding/activation_estimator.h,
// tensor_parallel_activation_config) against what the allocator measures on every rank of a
// tensor-parallel group: the tiny-Llama-shaped model of test_activation_estimate_measured.cpp,
// built for tensor-parallel rank r of the world (heads, FFN and vocabulary split), one forward +
// backward in f32; the kActivations peak of each rank must be within kMargin of the estimate.
// Margin 2%, as for one rank (what the estimate leaves out is the same: norm statistics, per-row
// loss terms); measured 0.2-0.3% under at tp 2 (printed). tp 4 replicates the two key/value
// heads, and without checkpointing the estimate is then 1.9% under (the replicas' key/value
// gradient sums, not modelled); 0.3-0.4% with it. Ignoring tensor parallelism overestimates by
// ~60% here.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/world.h"
#include "model/sequence_tiling.h"
#include "model/tensor_parallel.h"
#include "model/transformer_builder.h"
#include "sharding/activation_estimator.h"
#include "sharding/activation_measurement.h"

namespace zero::sharding {
namespace {

constexpr double kMargin = 0.02;

struct Options {
  std::string name;
  bool checkpointing = false;
  int64_t mlp_shards = 1;
};

int64_t measured_peak(const model::TransformerConfig& config, const Options& o, int64_t seq_len,
                      comm::Comm& group) {
  backend::CpuBackend cpu;
  auto net = model::build_transformer(config, cpu, DType::kF32,
                                      model::TensorParallelLayout{group.rank(), group.world_size()});
  net->set_tensor_group(&group);
  model::init_parameters(*net, 7);
  net->set_activation_checkpointing(o.checkpointing);
  net->set_sequence_tiling({o.mlp_shards, 1});
  return measurement::activation_peak(cpu, *net, measurement::id_batch(seq_len, config.vocab_size));
}

TEST(ActivationEstimateTensorParallel, EveryRanksPeakWithinMargin) {
  comm::Comm& world = comm::world();
  const std::vector<Options> options = {
      {"plain", false, 1}, {"checkpointing", true, 1}, {"checkpointing + tiled mlp 4", true, 4}};
  for (const int64_t vocab : {int64_t{256}, int64_t{4096}}) {
    const model::TransformerConfig config = measurement::tiny_llama(vocab);
    const model::TransformerConfig local =
        tensor_parallel_activation_config(config, world.world_size());
    for (const int64_t seq_len : {int64_t{256}, int64_t{1024}}) {
      for (const Options& o : options) {
        const int64_t measured = measured_peak(config, o, seq_len, world);
        ActivationSettings s;
        s.seq_len = seq_len;
        s.activation_bytes = 4;
        s.checkpointing = o.checkpointing;
        s.tiled_mlp_shards = o.mlp_shards;
        const ActivationMemory e = estimate_activations(local, s);
        const double ratio = static_cast<double>(e.peak_bytes) / static_cast<double>(measured);
        if (world.rank() == 0) {
          std::printf("tp %d vocab %5lld seq %5lld %-30s measured %9lld estimate %9lld (x%.3f)\n",
                      world.world_size(), static_cast<long long>(vocab),
                      static_cast<long long>(seq_len), o.name.c_str(),
                      static_cast<long long>(measured), static_cast<long long>(e.peak_bytes),
                      ratio);
        }
        EXPECT_NEAR(ratio, 1.0, kMargin) << o.name << " vocab " << vocab << " seq " << seq_len
                                         << " on rank " << world.rank();
      }
    }
  }
}

}  // namespace
}  // namespace zero::sharding
