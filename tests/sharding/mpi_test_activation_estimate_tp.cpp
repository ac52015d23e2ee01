// mpi-ranks: 2 4
// The activation estimate under tensor parallelism (sharding/activation_estimator.h,
// tensor_parallel_activation_config) against what the allocator measures on every rank of a
// tensor-parallel group: the tiny-Llama-shaped model of test_activation_estimate_measured.cpp,
// built for tensor-parallel rank r of the world (heads, FFN and vocabulary split), one forward +
// backward in f32; the kActivations peak of each rank must be within kMargin of the estimate.
// Margin 2%, as for one rank (what the estimate leaves out is the same: norm statistics, per-row
// loss terms); measured 0.2-0.3% under at tp 2 (printed). tp 4 replicates the two key/value
// heads. Ignoring tensor parallelism overestimates by ~60% here.
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

namespace zero::sharding {
namespace {

constexpr double kMargin = 0.02;

struct Options {
  std::string name;
  bool checkpointing = false;
  int64_t mlp_shards = 1;
};

model::TransformerConfig tiny_llama(int64_t vocab) {
  model::TransformerConfig c = model::preset_config("tiny-llama");
  c.vocab_size = vocab;
  c.max_position_embeddings = 1 << 16;
  return c;
}

model::Batch batch(int64_t seq_len, int64_t vocab) {
  Tensor ids = Tensor::zeros_host({1, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 13 + 5) % vocab;
  return model::batch_from_input_ids(ids);
}

int64_t measured_peak(const model::TransformerConfig& config, const Options& o, int64_t seq_len,
                      comm::Comm& group) {
  backend::CpuBackend cpu;
  auto net = model::build_transformer(config, cpu, DType::kF32,
                                      model::TensorParallelLayout{group.rank(), group.world_size()});
  net->set_tensor_group(&group);
  model::init_parameters(*net, 7);
  net->set_activation_checkpointing(o.checkpointing);
  net->set_sequence_tiling({o.mlp_shards, 1});
  const model::Batch b = batch(seq_len, config.vocab_size);
  cpu.allocator().reset_peaks();
  const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
  net->forward_backward(b);
  return static_cast<int64_t>(cpu.allocator().stats().peak(MemoryCategory::kActivations) - before);
}

TEST(ActivationEstimateTensorParallel, EveryRanksPeakWithinMargin) {
  comm::Comm& world = comm::world();
  const std::vector<Options> options = {
      {"plain", false, 1}, {"checkpointing", true, 1}, {"checkpointing + tiled mlp 4", true, 4}};
  for (const int64_t vocab : {int64_t{256}, int64_t{4096}}) {
    const model::TransformerConfig config = tiny_llama(vocab);
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
