// TiledMlp: the MLP half of a pre-norm transformer block, y = x1 + down(act(up(norm(x1)))) with
// act = GELU (c_fc) or SwiGLU (gate | up fused), run over row shards through SequenceTiledCompute
// (ALST's TiledMLP). Every op is row-independent, so tiling changes only the order in which weight
// gradients are summed. With N > 1 shards a training forward keeps only x1; backward recomputes
// each shard's norm statistics, up projection and activation from x1 and back-propagates that
// shard, so one shard's [rows/N, FFN] intermediates exist at a time. With N = 1 it saves its
// intermediates and runs exactly as the untiled block did.
//
// Parameters are not owned: the block passes views of its own (bound now) every call.
//
// Mixture of experts (config.is_moe(), model/moe_feed_forward.h): the up / activation / down
// part is the experts instead; the norm, residual and row shards are the same (routing is
// per token, so shards change only the order in which expert gradients are summed).
//
// Tensor parallelism (model/tensor_parallel.h): with a tensor group set, `up` holds this rank's
// rows of the inner width and `down` the matching columns; each shard's down projection is
// all-reduced over the group before the residual (its bias added by group rank 0 only), and the
// input gradient of the up projection is all-reduced before the norm's backward.
#pragma once
#include <optional>

#include "model/moe_feed_forward.h"
#include "model/norm_layer.h"
#include "model/sequence_tiled.h"
#include "model/transformer_config.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

// Views of the MLP half's parameters (or of their gradients). Undefined biases: none.
struct MlpTensors {
  Tensor norm_weight, norm_bias;  // [C]
  Tensor up, up_bias;             // [up_width, C] (gate and up fused for SwiGLU), [up_width]
  Tensor down, down_bias;         // [C, FFN], [C]
  // Mixture of experts: the router [E, C]; up and down stack the experts' [E * up_width, C]
  // and [E * C, FFN].
  Tensor router;
};

class TiledMlp {
 public:
  explicit TiledMlp(const TransformerConfig& config);

  // Whether the norm has a bias (LayerNorm) - the block declares parameters accordingly.
  bool norm_has_bias() const { return norm_.has_bias(); }
  // y [rows, C] for x1 [rows, C] over `shards` row shards (clamped to rows).
  Tensor forward(backend::Backend& backend, const Tensor& x1, const MlpTensors& params,
                 int64_t shards, bool training);
  // The block's residual add fused with this MLP's norm, for one shard: x1 += residual (in
  // place: x1 becomes the sum), then forward(x1, 1 shard). One backend op for the add and the
  // norm (Backend::add_layernorm_forward / add_rmsnorm_forward) instead of two passes.
  Tensor forward_after_residual(backend::Backend& backend, Tensor& x1, const Tensor& residual,
                                const MlpTensors& params, bool training);
  // d x1 for dy = d y (the residual included); gradients accumulate (+=) into `grads`.
  Tensor backward(backend::Backend& backend, const Tensor& dy, const MlpTensors& params,
                  MlpTensors& grads);
  void release();
  // The tensor-parallel group of the next forward/backward (null: the whole MLP). Not owned.
  void set_tensor_group(comm::Comm* group) { tensor_group_ = group; }
  // Mixture of experts: the step's load-balancing loss (null: none) and, for the backward,
  // d(objective)/d(loss). Not owned.
  void set_router_balance(RouterBalance* balance, double loss_grad) {
    balance_ = balance;
    loss_grad_ = loss_grad;
  }

 private:
  // One shard (or all rows) forward: see SequenceTiledCompute::ShardForward.
  void shard_forward(backend::Backend& backend, const Tensor& x1, Tensor* y,
                     const MlpTensors& params, bool save);
  // The rest of a shard's forward once h2 = norm(x1) is known.
  void shard_after_norm(backend::Backend& backend, const Tensor& x1, const Tensor& h2, Tensor* y,
                        const MlpTensors& params, bool save);
  Tensor shard_backward(backend::Backend& backend, const Tensor& dy, const MlpTensors& params,
                        MlpTensors& grads);

  int64_t inner_;
  bool swiglu_;
  NormLayer norm_;
  SequenceTiledCompute tiles_;
  Tensor x1_, h2_, up_, act_;  // what the last forward(save) kept, for one shard
  comm::Comm* tensor_group_ = nullptr;
  std::optional<MoeFeedForward> experts_;  // set for mixture-of-experts blocks
  RouterBalance* balance_ = nullptr;
  double loss_grad_ = 1.0;
};

}  // namespace zero::model
