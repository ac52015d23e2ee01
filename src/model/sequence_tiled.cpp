#include "model/sequence_tiled.h"

#include <algorithm>

#include "core/check.h"
#include "model/sequence_tiling.h"

namespace zero::model {
namespace {

void check_gradient(const Tensor& dx, const Tensor& x) {
  ZERO_CHECK(dx.shape() == x.shape() && dx.dtype() == x.dtype(),
             "sequence-tiled backward returned " << dx.describe() << " for input " << x.describe());
}

}  // namespace

Tensor SequenceTiledCompute::forward(backend::Backend& backend, const Tensor& x, int64_t shards,
                                     int64_t out_cols, DType out_dtype, bool training,
                                     const ShardForward& forward) {
  ZERO_CHECK(x.dim() == 2 && x.is_contiguous(), "sequence-tiled input must be a contiguous [rows, "
                                                "cols] tensor, got " << x.describe());
  const int64_t rows = x.size(0);
  shards_ = std::clamp<int64_t>(shards, 1, std::max<int64_t>(rows, 1));
  Tensor y = backend.empty({rows, out_cols}, out_dtype, MemoryCategory::kActivations);
  if (shards_ == 1) {
    forward(x, &y, training);
  } else {
    for (const RowShard& s : split_rows(rows, shards_)) {
      Tensor y_shard = y.slice_rows(s.begin, s.end);
      forward(x.slice_rows(s.begin, s.end), &y_shard, false);
    }
  }
  x_ = training ? x : Tensor();
  return y;
}

Tensor SequenceTiledCompute::backward(backend::Backend& backend, const Tensor& dy,
                                      const ShardForward& forward, const ShardBackward& backward) {
  ZERO_CHECK(x_.defined(), "sequence-tiled backward without a training forward");
  const int64_t rows = x_.size(0);
  ZERO_CHECK(dy.dim() == 2 && dy.size(0) == rows && dy.is_contiguous(),
             "sequence-tiled backward: dy " << dy.describe() << " for " << rows << " rows");
  if (shards_ == 1) {
    Tensor dx = backward(dy);
    check_gradient(dx, x_);
    release();
    return dx;
  }
  Tensor dx = backend.empty(x_.shape(), x_.dtype(), MemoryCategory::kActivations);
  for (const RowShard& s : split_rows(rows, shards_)) {
    const Tensor x_shard = x_.slice_rows(s.begin, s.end);
    forward(x_shard, nullptr, true);
    const Tensor dx_part = backward(dy.slice_rows(s.begin, s.end));
    check_gradient(dx_part, x_shard);
    Tensor dx_shard = dx.slice_rows(s.begin, s.end);
    backend.copy(dx_shard, dx_part);
  }
  release();
  return dx;
}

}  // namespace zero::model
