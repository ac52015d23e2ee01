// The data side of Ulysses sequence parallelism: each rank's slice of the sequence keeps the
// targets built from the whole sequence (a shard's last target is the next shard's first
// token), and carries the whole sequence's count of valid targets.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/sequence_shard.h"

namespace zero::engine {
namespace {

model::Batch sample_batch() {
  // Two sequences of 8 tokens: row r holds 10 r + t.
  Tensor ids = Tensor::zeros_host({2, 8}, DType::kI64);
  for (int64_t i = 0; i < 16; ++i) ids.data<int64_t>()[i] = (i / 8) * 10 + i % 8;
  return model::batch_from_input_ids(ids);
}

TEST(SequenceShard, KeepsTargetsThatCrossTheBoundary) {
  const model::Batch full = sample_batch();
  const model::Batch first = shard_sequence(full, 0, 2);
  const model::Batch second = shard_sequence(full, 1, 2);
  ASSERT_EQ(first.tokens.shape(), (Shape{2, 4}));
  ASSERT_EQ(second.targets.shape(), (Shape{2, 4}));
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(first.tokens.data<int64_t>()[r * 4 + t], r * 10 + t);
      EXPECT_EQ(second.tokens.data<int64_t>()[r * 4 + t], r * 10 + 4 + t);
    }
    // Rank 0's last target is rank 1's first token: kept, not ignored.
    EXPECT_EQ(first.targets.data<int64_t>()[r * 4 + 3], r * 10 + 4);
    EXPECT_EQ(second.targets.data<int64_t>()[r * 4 + 3], model::kIgnoreIndex);  // sequence end
  }
  // 2 x 7 valid targets in the whole batch; every shard carries that count.
  EXPECT_EQ(count_valid_targets(full.targets), 14);
  EXPECT_EQ(first.loss_valid_targets, 14);
  EXPECT_EQ(second.loss_valid_targets, 14);
}

TEST(SequenceShard, CountsIgnoredTargetsOverTheWholeSequence) {
  model::Batch full = sample_batch();
  for (int64_t t = 2; t < 6; ++t) full.targets.data<int64_t>()[t] = model::kIgnoreIndex;
  for (int r = 0; r < 4; ++r) {
    const model::Batch part = shard_sequence(full, r, 4);
    EXPECT_EQ(part.seq_len(), 2);
    EXPECT_EQ(part.loss_valid_targets, 10) << "rank " << r;
  }
  // A count the batch already carries wins (a shard of a shard keeps the sequence's count).
  full.loss_valid_targets = 99;
  EXPECT_EQ(shard_sequence(full, 1, 2).loss_valid_targets, 99);
}

TEST(SequenceShard, I32TokensKeepTheirDtype) {
  Tensor ids = Tensor::zeros_host({1, 4}, DType::kI32);
  for (int32_t i = 0; i < 4; ++i) ids.data<int32_t>()[i] = i + 1;
  model::Batch full{ids, ids};
  const model::Batch part = shard_sequence(full, 1, 2);
  EXPECT_EQ(part.tokens.dtype(), DType::kI32);
  EXPECT_EQ(part.tokens.data<int32_t>()[0], 3);
  EXPECT_EQ(part.loss_valid_targets, 4);
}

TEST(SequenceShard, SequenceThatDoesNotDivideIsAClearError) {
  try {
    shard_sequence(sample_batch(), 0, 3);
    FAIL() << "accepted";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sequence length 8"), std::string::npos) << what;
    EXPECT_NE(what.find("sequence_parallel_size 3"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace zero::engine
