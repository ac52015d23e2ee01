// Prompt/response shards in training: ShardData turns prompt tokens into ignored targets
// (-100) exactly at their positions, and the model's loss on such a batch equals the mean of
// -log softmax over the response targets only, computed here by hand from the logits. A
// micro-batch whose targets are all masked gives loss 0 and a zero gradient (not NaN), and —
// DeepSpeed's per-micro-batch averaging — still counts as one of the step's micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/self_comm.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"
#include "engine/data_sources.h"
#include "engine/masked_corpus.h"
#include "engine/zero_harness.h"
#include "model/step_context.h"

namespace zero::engine {
namespace masked_training_test {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;

TEST(MaskedTraining, ShardDataIgnoresExactlyThePromptTargets) {
  data::testing::ScratchDir dir;
  const MaskedCorpus corpus = masked_corpus(40);
  const std::string path = dir.path("pairs.bin");
  data::write_token_shard(path, corpus.tokens, corpus.mask);
  // No shuffling question: every window is read once per epoch, so check each one it gives.
  ShardData data({path}, 37, kSeqLen, 0, 1, 5);
  const int64_t windows = (static_cast<int64_t>(corpus.tokens.size()) - 1) / kSeqLen;
  int64_t ignored = 0;
  for (int64_t n = 0; n < windows; ++n) {
    const model::Batch batch = data.next(1, kSeqLen);
    const int32_t* tokens = batch.tokens.data<int32_t>();
    const int32_t* targets = batch.targets.data<int32_t>();
    // Find the window by its tokens: windows start at multiples of kSeqLen.
    int64_t start = -1;
    for (int64_t w = 0; w < windows && start < 0; ++w) {
      bool same = true;
      for (int64_t t = 0; t < kSeqLen; ++t)
        same = same && tokens[t] == static_cast<int32_t>(corpus.tokens[static_cast<size_t>(w * kSeqLen + t)]);
      if (same) start = w * kSeqLen;
    }
    ASSERT_GE(start, 0);
    for (int64_t t = 0; t < kSeqLen; ++t) {
      const auto next = static_cast<size_t>(start + t + 1);
      const int32_t expected =
          corpus.mask[next] != 0 ? static_cast<int32_t>(corpus.tokens[next]) : -100;
      EXPECT_EQ(targets[t], expected) << "window at " << start << " position " << t;
      ignored += targets[t] == -100 ? 1 : 0;
    }
  }
  EXPECT_GT(ignored, 0);
}

// -log softmax(row)[target] in double, straight from the definition.
double token_loss(const float* row, int64_t vocab, int64_t target) {
  double largest = row[0];
  for (int64_t v = 1; v < vocab; ++v) largest = std::max(largest, static_cast<double>(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - largest);
  return largest + std::log(sum) - static_cast<double>(row[target]);
}

TEST(MaskedTraining, LossIsTheMeanOverResponseTokensOnly) {
  data::testing::ScratchDir dir;
  const MaskedCorpus corpus = masked_corpus(40);
  const std::string path = dir.path("pairs.bin");
  data::write_token_shard(path, corpus.tokens, corpus.mask);
  ShardData data({path}, 37, kSeqLen, 0, 1, 5);
  const model::Batch batch = data.next(4, kSeqLen);

  backend::CpuBackend cpu;
  auto net = small_model("gpt2", cpu);
  Tensor logits;
  model::StepContext ctx{cpu, batch};
  ctx.training = false;
  ctx.capture_logits = &logits;
  const double loss = net->forward(ctx);

  const int64_t vocab = 37, rows = 4 * kSeqLen;
  double response_sum = 0.0, all_sum = 0.0;
  int64_t responses = 0, all = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t target = batch.targets.data<int32_t>()[i];
    if (target == -100) {
      // What the unmasked target would have been: the next input token (or the window's end).
      if (i % kSeqLen + 1 < kSeqLen) {
        all_sum += token_loss(logits.data<float>() + i * vocab, vocab, batch.tokens.data<int32_t>()[i + 1]);
        ++all;
      }
      continue;
    }
    const double l = token_loss(logits.data<float>() + i * vocab, vocab, target);
    response_sum += l;
    all_sum += l;
    ++responses;
    ++all;
  }
  ASSERT_GT(responses, 0);
  ASSERT_LT(responses, rows);
  const double by_hand = response_sum / static_cast<double>(responses);
  EXPECT_NEAR(loss, by_hand, 1e-5 * by_hand);
  // Not the mean over every position: the mask changed the loss.
  EXPECT_GT(std::abs(loss - all_sum / static_cast<double>(all)), 1e-3);

  // The engine reports the same loss for the same batch (training forward).
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), zero_settings(0, 4, 1, 1), self);
  EXPECT_NEAR(engine.forward(batch), by_hand, 1e-5 * by_hand);
}

model::Batch all_masked_batch(int64_t micro) {
  model::Batch batch;
  batch.tokens = Tensor::zeros_host({micro, kSeqLen}, DType::kI32);
  batch.targets = Tensor::zeros_host({micro, kSeqLen}, DType::kI32);
  for (int64_t i = 0; i < micro * kSeqLen; ++i) {
    batch.tokens.data<int32_t>()[i] = static_cast<int32_t>(1 + i % 30);
    batch.targets.data<int32_t>()[i] = -100;
  }
  return batch;
}

TEST(MaskedTraining, FullyMaskedMicroBatchHasZeroLossAndGradient) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), zero_settings(0, 2, 1, 1), self);
  const double loss = engine.forward(all_masked_batch(2));
  EXPECT_EQ(loss, 0.0);
  engine.backward();
  EXPECT_TRUE(engine.step());
  EXPECT_EQ(engine.last_grad_norm(), 0.0);
  for (const float p : to_vector(engine.gather_parameters())) ASSERT_TRUE(std::isfinite(p));
}

// The step's gradient is the mean over micro-batches (DeepSpeed's 1/gas), not over target
// tokens: a fully masked micro-batch next to a normal one halves the step's gradient.
TEST(MaskedTraining, FullyMaskedMicroBatchStillCountsInTheAverage) {
  data::testing::ScratchDir dir;
  const MaskedCorpus corpus = masked_corpus(40);
  const std::string path = dir.path("pairs.bin");
  data::write_token_shard(path, corpus.tokens, corpus.mask);
  ShardData data({path}, 37, kSeqLen, 0, 1, 5);
  const model::Batch normal = data.next(2, kSeqLen);

  backend::CpuBackend cpu;
  comm::SelfComm self;
  EngineSettings one = zero_settings(0, 2, 1, 1), two = zero_settings(0, 2, 2, 1);
  one.gradient_clipping = two.gradient_clipping = 0.0;
  Engine alone(small_model("gpt2", cpu), one, self);
  alone.forward(normal);
  alone.backward();
  alone.step();
  Engine with_masked(small_model("gpt2", cpu), two, self);
  with_masked.forward(all_masked_batch(2));
  with_masked.backward();
  with_masked.step();
  with_masked.forward(normal);
  with_masked.backward();
  with_masked.step();
  EXPECT_GT(alone.last_grad_norm(), 0.0);
  EXPECT_NEAR(with_masked.last_grad_norm(), alone.last_grad_norm() / 2, 1e-6 * alone.last_grad_norm());
}

}  // namespace masked_training_test
}  // namespace zero::engine
