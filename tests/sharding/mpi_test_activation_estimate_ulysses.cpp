// mpi-ranks: 2 4
// The activation estimate under Ulysses sequence parallelism against the allocator: every rank of
// the world is one sequence group (sp = 2 or 4) running one forward + backward of a
// tiny-Llama-shaped model (4 query / 2 KV heads, so sp = 4 replicates each KV head twice) on its
// T/sp tokens; each rank's kActivations peak must be within kMargin of estimate_activations with
// sequence_parallel = sp.
//
// Margin 6%. Measured: within 0.2% at sp = 2 in every case, and at sp = 4 without tiling; at
// sp = 4 (each KV head replicated on two ranks) with a tiled MLP, where the attention half's
// backward makes the block's peak, the measured peak is 4.6% above the estimate: about one
// [t, hidden]-sized buffer (~128 KB at t = 256, the same with 4 KV heads or 1, and with 8/8
// heads; not with 8 query / 2 KV heads) more than the derivation in activation_estimator.h
// finds, during the last block's backward (not explained yet). A wrong gathered term is far
// larger: the gathered q/k/v/output Ulysses keeps per block are ~30% of the tiled block here.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/world.h"
#include "engine/sequence_shard.h"
#include "model/transformer_builder.h"
#include "sharding/activation_estimator.h"

namespace zero::sharding {
namespace {

constexpr double kMargin = 0.06;
constexpr int64_t kSeqLen = 1024;

struct Case {
  std::string name;
  bool checkpointing;
  int64_t mlp_shards;
};

TEST(ActivationEstimateUlysses, RankPeakWithinMargin) {
  comm::Comm& world = comm::world();
  const int sp = world.world_size();
  model::TransformerConfig config = model::preset_config("tiny-llama");
  config.max_position_embeddings = kSeqLen;
  Tensor ids = Tensor::zeros_host({1, kSeqLen}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 13 + 5) % config.vocab_size;
  const model::Batch shard =
      engine::shard_sequence(model::batch_from_input_ids(ids), world.rank(), sp);
  for (const Case& c : std::vector<Case>{{"plain", false, 1},
                                         {"checkpointing", true, 1},
                                         {"checkpointing + tiled mlp 4", true, 4}}) {
    backend::CpuBackend cpu;
    auto net = model::build_transformer(config, cpu, DType::kF32);
    model::init_parameters(*net, 7);
    net->set_sequence_group(&world);
    net->set_activation_checkpointing(c.checkpointing);
    net->set_sequence_tiling({c.mlp_shards, 1});
    cpu.allocator().reset_peaks();
    const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
    net->forward_backward(shard);
    const auto measured = static_cast<int64_t>(
        cpu.allocator().stats().peak(MemoryCategory::kActivations) - before);

    ActivationSettings s;
    s.seq_len = kSeqLen;
    s.sequence_parallel = sp;
    s.activation_bytes = 4;
    s.checkpointing = c.checkpointing;
    s.tiled_mlp_shards = c.mlp_shards;
    const ActivationMemory e = estimate_activations(config, s);
    const double ratio = static_cast<double>(e.peak_bytes) / static_cast<double>(measured);
    if (world.rank() == 0) {
      std::printf("sp %d %-30s measured %9lld estimate %9lld (x%.3f)\n", sp, c.name.c_str(),
                  static_cast<long long>(measured), static_cast<long long>(e.peak_bytes), ratio);
    }
    EXPECT_NEAR(ratio, 1.0, kMargin) << c.name << " sp " << sp << " rank " << world.rank();
  }
}

}  // namespace
}  // namespace zero::sharding
