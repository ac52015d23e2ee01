// slice_runs (model/tensor_slice_gather.h) against extract_tensor_slice, the definition of a
// part: every local element range maps to the logical elements the part holds, for
// column-parallel (dim 0, fused q|k|v blocks), row-parallel (dim 1), balanced vocabulary parts
// and 1-d biases; slice_local_shape and slice_of_rank agree with make_tensor_slice.
#include <gtest/gtest.h>

#include <vector>

#include "model/tensor_parallel.h"
#include "model/tensor_slice_gather.h"

namespace zero::model {
namespace {

// A slice of part `index` of `parts` of logical tensor `full` along `dim` in `blocks` blocks.
TensorSlice slice_of(const Shape& full, int dim, int64_t parts, int64_t index, int64_t blocks = 1) {
  TensorSlice s;
  s.dim = dim;
  s.parts = parts;
  s.index = index;
  s.blocks = blocks;
  s.full_shape = full;
  return s;
}

void expect_runs_match_extract(const TensorSlice& s) {
  const int64_t full_numel = shape_numel(s.full_shape);
  std::vector<double> full(static_cast<size_t>(full_numel));
  for (int64_t i = 0; i < full_numel; ++i) full[static_cast<size_t>(i)] = static_cast<double>(i);
  const int64_t numel = shape_numel(slice_local_shape(s));
  std::vector<double> part(static_cast<size_t>(numel));
  extract_tensor_slice(s, full.data(), part.data());
  // Every range [offset, offset + count) of a few sizes, as ZeRO partitions cut them.
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{7}, numel}) {
    for (int64_t offset = 0; offset + count <= numel; offset += count) {
      int64_t covered = 0;
      for (const SliceRun& run : slice_runs(s, offset, count)) {
        ASSERT_EQ(run.local, offset + covered);
        for (int64_t i = 0; i < run.length; ++i) {
          ASSERT_EQ(part[static_cast<size_t>(run.local + i)], static_cast<double>(run.logical + i))
              << "dim " << s.dim << " part " << s.index << " of " << s.parts << ", element "
              << run.local + i;
        }
        covered += run.length;
      }
      EXPECT_EQ(covered, count);
    }
  }
}

TEST(TensorSliceGather, RunsMatchExtractedParts) {
  for (int64_t parts : {1, 2, 4}) {
    for (int64_t index = 0; index < parts; ++index) {
      expect_runs_match_extract(slice_of({12, 5}, 0, parts, index));     // column-parallel rows
      expect_runs_match_extract(slice_of({24, 5}, 0, parts, index, 3));  // fused q | k | v
      expect_runs_match_extract(slice_of({5, 12}, 1, parts, index));     // row-parallel columns
      expect_runs_match_extract(slice_of({37, 6}, 0, parts, index));     // odd vocabulary rows
      expect_runs_match_extract(slice_of({12}, 0, parts, index, 3));     // fused 1-d bias
    }
  }
}

TEST(TensorSliceGather, ContiguousPartsAreOneRunAndRowParallelOnePerRow) {
  EXPECT_EQ(slice_runs(slice_of({12, 5}, 0, 2, 1), 0, 30).size(), 1u);
  EXPECT_EQ(slice_runs(slice_of({5, 12}, 1, 2, 1), 0, 30).size(), 5u);
  EXPECT_EQ(slice_runs(std::nullopt, 4, 9).front().logical, 4);
}

TEST(TensorSliceGather, ShapesAndRanksAgreeWithMakeTensorSlice) {
  const TensorSlice made = make_tensor_slice({6, 32}, 0, 2, 1, 3);
  EXPECT_EQ(slice_local_shape(made), (Shape{6, 32}));
  const TensorSlice vocab = make_balanced_slice({19, 8}, 0, 37, 2, 1);
  EXPECT_EQ(slice_local_shape(vocab), (Shape{19, 8}));
  EXPECT_EQ(slice_local_shape(slice_of_rank(vocab, 0)), (Shape{18, 8}));
  TensorSlice kv = make_tensor_slice({8, 32}, 0, 2, 1, 1, 2);  // 2 parts x 2 replicas
  EXPECT_EQ(slice_of_rank(kv, 3).index, 1);
  EXPECT_EQ(slice_of_rank(kv, 1).index, 0);
  ParamSpec spec{"k", {8, 32}};
  spec.slice = kv;
  EXPECT_TRUE(writes_tensor_part(spec, 2));
  EXPECT_FALSE(writes_tensor_part(spec, 3));
  EXPECT_TRUE(writes_tensor_part(ParamSpec{"norm", {32}}, 0));
  EXPECT_FALSE(writes_tensor_part(ParamSpec{"norm", {32}}, 1));
}

}  // namespace
}  // namespace zero::model
