// mpi-ranks: 2
// A prompt/response shard (loss mask) trained under ZeRO-3 on N ranks gives exactly the losses
// and final parameters of one rank at stage 0 accumulating the same N micro-batches. With one
// sequence per micro-batch, ShardData's sampler hands rank r of N the windows one rank reads as
// its micro-batches r, r + N, ... (the window count divides by N), so both runs see the same
// data in the same grouping; the masked targets (-100) travel with the windows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/self_comm.h"
#include "comm/world.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"
#include "engine/data_sources.h"
#include "engine/masked_corpus.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 10;
constexpr int64_t kSeqLen = 8;
constexpr int64_t kWindows = 24;  // divides by 2, 3 and 4 ranks
constexpr uint64_t kSeed = 3;

// This rank's copy of the shard (each rank its own folder: no two processes write one file).
std::string write_shard(const data::testing::ScratchDir& dir, bool masked) {
  MaskedCorpus corpus = masked_corpus(60);
  corpus.tokens.resize(kWindows * kSeqLen + 1);
  corpus.mask.resize(corpus.tokens.size());
  const std::string path = dir.path(masked ? "pairs.bin" : "plain.bin");
  if (masked) {
    data::write_token_shard(path, corpus.tokens, corpus.mask);
  } else {
    data::write_token_shard(path, corpus.tokens);
  }
  return path;
}

struct TrainingRun {
  std::vector<double> losses;  // micro-batch losses, in global micro-batch order per step
  std::vector<float> params;
};

TrainingRun single_rank(const std::string& family, const std::string& path, int world) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model(family, cpu), zero_settings(0, 1, world, 1), self);
  ShardData data({path}, engine.model().config()->vocab_size, kSeqLen, 0, 1, kSeed);
  TrainingRun run;
  for (int step = 0; step < kSteps; ++step) {
    for (int j = 0; j < world; ++j) {
      run.losses.push_back(engine.forward(data.next(1, kSeqLen)));
      engine.backward();
    }
    engine.step();
  }
  run.params = to_vector(engine.gather_parameters());
  return run;
}

class MaskedZero3 : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskedZero3, MatchesOneRankBitForBit) {
  const std::string family = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  data::testing::ScratchDir dir;
  const std::string masked = write_shard(dir, true), plain = write_shard(dir, false);
  const TrainingRun reference = single_rank(family, masked, n);
  // The mask matters: the same windows without it give other losses.
  const TrainingRun unmasked = single_rank(family, plain, n);
  EXPECT_NE(reference.losses[0], unmasked.losses[0]);

  backend::CpuBackend cpu;
  Engine engine(small_model(family, cpu), zero_settings(3, 1, 1, n), world);
  ShardData data({masked}, engine.model().config()->vocab_size, kSeqLen, world.rank(), n, kSeed);
  for (int step = 0; step < kSteps; ++step) {
    const double loss = engine.forward(data.next(1, kSeqLen));
    engine.backward();
    engine.step();
    EXPECT_EQ(loss, reference.losses[static_cast<size_t>(step * n + world.rank())]) << "step " << step;
  }
  EXPECT_EQ(to_vector(engine.gather_parameters()), reference.params);
}

INSTANTIATE_TEST_SUITE_P(Families, MaskedZero3, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace zero::engine
