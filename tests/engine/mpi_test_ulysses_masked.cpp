// mpi-ranks: 2 4
// Loss masks under Ulysses sequence parallelism: a prompt/response token shard (masked targets
// become model::kIgnoreIndex) trained at sp = 2 (and, at world 4, sp = 2 x dp = 2 and sp = 4)
// with ZeRO-3 gives the losses and parameters of one rank at stage 0 reading the same windows.
// The shard holds, besides masked_corpus.h's records, a window whose targets are all masked (the
// whole sequence counts nothing: loss and gradient 0), one whose first half is masked (at sp = 2
// rank 0's part has no valid target), one whose second half is, and one with a masked span
// across the middle (a part boundary for sp = 2 and 4); the test checks the run met each case.
// The loss is the mean over the whole sequence's valid targets: each rank's part weighs its
// tokens by the full count, so a part with none contributes nothing rather than NaN.
//
// Tolerance (f32): relative 1e-5 on losses and parameters, as in mpi_test_ulysses.cpp (the
// split associates the loss and gradient sums differently). Masked-out losses are exactly 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"
#include "engine/data_sources.h"
#include "engine/masked_corpus.h"
#include "engine/sequence_shard.h"
#include "engine/ulysses_comparison.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 8;
constexpr int64_t kSeqLen = 16;  // the tiny models' position table
constexpr int64_t kWindows = 8;  // one epoch is 8 micro-batches of one window
constexpr uint64_t kSeed = 5;
constexpr double kRelative = 1e-5;

// Window w's target t is token w * kSeqLen + t + 1, kept when that token's mask is 1.
void mask_targets(std::vector<uint8_t>& mask, int64_t window, int64_t first, int64_t last,
                  uint8_t value) {
  for (int64_t t = first; t < last; ++t) mask[static_cast<size_t>(window * kSeqLen + t + 1)] = value;
}

// This rank's copy of the shard (each rank its own folder: no two processes write one file).
std::string write_shard(const data::testing::ScratchDir& dir, bool masked) {
  MaskedCorpus corpus = masked_corpus(40);
  corpus.tokens.resize(kWindows * kSeqLen + 1);
  corpus.mask.resize(corpus.tokens.size());
  mask_targets(corpus.mask, 0, 0, kSeqLen, 0);                // nothing to learn
  mask_targets(corpus.mask, 1, 0, kSeqLen / 2, 0);            // the first half
  mask_targets(corpus.mask, 1, kSeqLen / 2, kSeqLen, 1);
  mask_targets(corpus.mask, 2, 0, kSeqLen / 2, 1);            // the second half
  mask_targets(corpus.mask, 2, kSeqLen / 2, kSeqLen, 0);
  mask_targets(corpus.mask, 3, 0, kSeqLen, 1);                // a span across the middle
  mask_targets(corpus.mask, 3, kSeqLen / 2 - 3, kSeqLen / 2 + 2, 0);
  const std::string path = dir.path(masked ? "pairs.bin" : "plain.bin");
  if (masked) {
    data::write_token_shard(path, corpus.tokens, corpus.mask);
  } else {
    data::write_token_shard(path, corpus.tokens);
  }
  return path;
}

struct TrainingRun {
  std::vector<double> losses;  // micro-batch losses in global micro-batch order per step
  std::vector<float> params;
};

TrainingRun single_rank(const std::string& family, const std::string& path, int64_t gas) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model(family, cpu), zero_settings(0, 1, gas, 1), self);
  ShardData data({path}, engine.model().config()->vocab_size, kSeqLen, 0, 1, kSeed);
  TrainingRun run;
  for (int step = 0; step < kSteps; ++step) {
    for (int64_t j = 0; j < gas; ++j) {
      run.losses.push_back(engine.forward(data.next(1, kSeqLen)));
      engine.backward();
    }
    engine.step();
  }
  run.params = to_vector(engine.gather_parameters());
  return run;
}

// Which masking cases a run's batches met, seen from the sequence parts.
struct Coverage {
  bool sequence_without_targets = false;  // the whole sequence masked
  bool part_without_targets = false;      // one part masked, the sequence not
  bool span_across_parts = false;         // consecutive masked targets in two parts
  void add(const model::Batch& batch, int sp) {
    const int64_t part = kSeqLen / sp;
    const int64_t all = count_valid_targets(batch.targets);
    if (all == 0) sequence_without_targets = true;
    for (int r = 0; r < sp; ++r) {
      const model::Batch piece = shard_sequence(batch, r, sp);
      if (count_valid_targets(piece.targets) == 0 && all > 0) part_without_targets = true;
    }
    // A masked span across the boundary of parts r - 1 and r, both of which keep targets.
    const int32_t* targets = batch.targets.data<int32_t>();
    for (int r = 1; r < sp; ++r) {
      if (targets[r * part - 1] == model::kIgnoreIndex && targets[r * part] == model::kIgnoreIndex &&
          count_valid_targets(shard_sequence(batch, r - 1, sp).targets) > 0 &&
          count_valid_targets(shard_sequence(batch, r, sp).targets) > 0) {
        span_across_parts = true;
      }
    }
  }
};


struct Layout {
  int sp = 1;
  int dp = 1;
};

class UlyssesMasked : public ::testing::TestWithParam<std::string> {};

TEST_P(UlyssesMasked, SequenceParallelGivesTheOneRankLosses) {
  const std::string family = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  data::testing::ScratchDir dir;
  const std::string masked = write_shard(dir, true), plain = write_shard(dir, false);
  std::vector<Layout> layouts = {{2, n / 2}};
  if (n == 4) layouts.push_back({4, 1});
  for (const Layout& layout : layouts) {
    SCOPED_TRACE("sp=" + std::to_string(layout.sp) + " x dp=" + std::to_string(layout.dp));
    const TrainingRun reference = single_rank(family, masked, layout.dp);
    // The mask matters: the same windows without it give other losses.
    const TrainingRun unmasked = single_rank(family, plain, layout.dp);
    EXPECT_NE(reference.losses, unmasked.losses);

    comm::Mesh mesh(world, comm::Mesh::sequence_parallel_shape(n, layout.sp));
    const int data_rank = mesh.coordinate(comm::MeshAxis::kData);
    backend::CpuBackend cpu;
    EngineSettings s = zero_settings(3, 1, 1, layout.dp);
    s.sequence_parallel_size = layout.sp;
    Engine engine(small_model(family, cpu), s, mesh.data_sequence_group(),
                  &mesh.group(comm::MeshAxis::kSequence));
    ShardData data({masked}, engine.model().config()->vocab_size, kSeqLen, data_rank, layout.dp, kSeed);
    Coverage coverage;
    for (int step = 0; step < kSteps; ++step) {
      const model::Batch batch = data.next(1, kSeqLen);
      coverage.add(batch, layout.sp);
      const double loss = engine.forward(batch);
      engine.backward();
      engine.step();
      const double want = reference.losses[static_cast<size_t>(step * layout.dp + data_rank)];
      EXPECT_LE(std::abs(loss - want), kRelative * std::abs(want))
          << "step " << step << ": " << loss << " vs " << want;
    }
    expect_params_close(engine.model(), to_vector(engine.gather_parameters()), reference.params, kRelative);
    // Every case was met by some replica.
    auto met = [&](bool local) {
      return world.all_reduce_scalar(local ? 1.0 : 0.0, comm::ReduceOp::kMax) > 0.0;
    };
    EXPECT_TRUE(met(coverage.sequence_without_targets));
    EXPECT_TRUE(met(coverage.part_without_targets));
    EXPECT_TRUE(met(coverage.span_across_parts));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, UlyssesMasked, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace zero::engine
