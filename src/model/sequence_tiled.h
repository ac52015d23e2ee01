// SequenceTiledCompute: runs a row-independent computation y[rows, out] = f(x[rows, in]) over
// contiguous row shards (model/sequence_tiling.h, split_rows), so only one shard's intermediates
// exist at a time, and recomputes each shard's forward in backward (DeepSpeed/ALST's
// SequenceTiledCompute). Any unit whose rows do not interact (an MLP, a norm, a projection) can use
// it; TiledMlp does.
//
// The caller supplies, per call (so they capture the parameter views bound right now, which ZeRO-3
// rebinds between forward and backward):
//   forward(x_shard, y_shard, save): computes the shard. y_shard is a contiguous view into the
//     full output to overwrite, or null when backward only recomputes (the output is not needed:
//     skip what only it needs). `save`: keep what backward needs inside the caller.
//   backward(dy_shard) -> dx_shard: consumes what the last forward(save = true) kept and returns
//     the shard's input gradient [n, in] (copied into the full dx unless there is one shard);
//     parameter gradients accumulate (+=), so they add up over shards and leave the unit once,
//     after its backward.
// With one shard nothing is recomputed: a training forward saves, as an untiled unit does.
// With more, the forward saves nothing but a reference to x (not a copy).
//
// Thread/stream rules: those of the backend; one thread drives it.
#pragma once
#include <functional>

#include "backend/backend.h"

namespace zero::model {

class SequenceTiledCompute {
 public:
  using ShardForward = std::function<void(const Tensor& x_shard, Tensor* y_shard, bool save)>;
  using ShardBackward = std::function<Tensor(const Tensor& dy_shard)>;

  // y [rows, out_cols] of `out_dtype` (kActivations) over `shards` row shards of x [rows, in]
  // (shards is clamped to [1, rows]). `training`: backward() follows.
  Tensor forward(backend::Backend& backend, const Tensor& x, int64_t shards, int64_t out_cols,
                 DType out_dtype, bool training, const ShardForward& forward);
  // dx [rows, in] (x's dtype) for dy [rows, out]; `forward` is the same computation as above,
  // re-run per shard with save = true just before `backward` (skipped with one shard). Releases.
  Tensor backward(backend::Backend& backend, const Tensor& dy, const ShardForward& forward,
                  const ShardBackward& backward);
  void release() { x_ = Tensor(); }
  // The shard count the last forward used.
  int64_t shards() const { return shards_; }

 private:
  Tensor x_;
  int64_t shards_ = 1;
};

}  // namespace zero::model
