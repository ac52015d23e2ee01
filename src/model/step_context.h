// StepContext: what units read while running one micro-batch: the backend, the batch, and
// flags. Units keep their own saved activations; the context only carries per-step inputs.
#pragma once
#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "core/tensor.h"
#include "model/sequence_tiling.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

class KvCache;
class RouterBalance;

inline constexpr int64_t kIgnoreIndex = -100;  // targets equal to this contribute no loss

// One micro-batch of token ids on the host: tokens and targets are i32 or i64 [B, T];
// targets[b, t] is the token that should follow tokens[b, t] (kIgnoreIndex to skip).
struct Batch {
  Tensor tokens;
  Tensor targets;
  // The number of non-ignored targets the loss is a mean over; unset: counted from `targets`.
  // A sequence-parallel shard (engine/sequence_shard.h) carries its whole sequence's count, so
  // its loss is its part of the full sequence's mean and the shards' losses sum to it.
  std::optional<int64_t> loss_valid_targets = std::nullopt;
  int64_t batch_size() const { return tokens.size(0); }
  int64_t seq_len() const { return tokens.size(1); }
};

// The micro-batch on the backend's device, what units read: flat [B*T] tokens and targets, and
// the number of targets that count towards the loss (counted on the host from the host batch,
// so the mean needs no device read).
struct DeviceBatch {
  Tensor tokens;
  Tensor targets;
  int64_t valid_targets = 0;
  bool defined() const { return tokens.defined(); }
};

// Checks `batch` on the host (shapes, dtypes; with a vocab_size, every token id in [0, V) and
// every target in [0, V) or kIgnoreIndex — a GPU kernel cannot throw on a bad id) and uploads it
// with two counted host-to-device copies on the transfer stream; the compute stream waits for
// them through an event. Throws ShapeError/Error naming the bad id and its position.
DeviceBatch upload_batch(backend::Backend& backend, const Batch& batch,
                         std::optional<int64_t> vocab_size);
// Inference (generation): the token ids alone, checked as upload_batch checks them, in one
// counted copy; the batch's targets are neither read nor uploaded (targets stays undefined).
DeviceBatch upload_tokens(backend::Backend& backend, const Tensor& tokens,
                          std::optional<int64_t> vocab_size);

// Builds targets the way Hugging Face does from labels == input_ids: targets[b, t] =
// tokens[b, t + 1] and the last position ignored.
Batch batch_from_input_ids(const Tensor& input_ids);

struct StepContext {
  backend::Backend& backend;
  const Batch& batch;  // on the host
  bool training = true;  // false: no state is saved for backward, no gradients
  // When set, the head unit copies the logits [B*T, V] here (tests and evaluation).
  Tensor* capture_logits = nullptr;
  // The dtype activations are stored in (set by Model from Model::activation_dtype(); unset:
  // the parameters' dtype). Mixed precision stores them in bf16/fp16 as a GPU run does.
  std::optional<DType> activation_dtype = std::nullopt;
  // The batch on the device (Model::forward uploads it when it is not defined yet).
  DeviceBatch device_batch = {};
  // d(objective)/d(loss) for the loss unit's backward (set by Model::backward). A caller that
  // knows it before the forward sets it then too (the Engine: its loss scale), so a unit that
  // back-propagates inside its forward (the tiled logits loss) scales before rounding; a
  // different value at backward is still honoured (the unit rescales).
  double loss_grad = 1.0;
  // Row shards of the tiled MLP and logits + loss (set by Model from Model::sequence_tiling()).
  SequenceTiling sequence_tiling = {};
  // Ulysses sequence parallelism (set by Model from Model::sequence_group()): the ranks that
  // each hold a consecutive part of every sequence (null: the batch is whole), and the global
  // position of this rank's first token (positions and rotary angles start there).
  comm::Comm* sequence_group = nullptr;
  int64_t sequence_offset = 0;
  // Tensor parallelism (set by Model from Model::tensor_group(); model/tensor_parallel.h): the
  // ranks that each hold a part of every block's heads and MLP width (null: whole blocks).
  comm::Comm* tensor_group = nullptr;
  // Generation (Model::next_token_logits, model/kv_cache.h): when set, the step's first position
  // is sequence_offset == kv_cache->length(), each block appends its keys and values to the
  // cache and attends over every cached position, and the head returns the logits [B, V] of each
  // sequence's last position instead of the loss. Inference only: training is false.
  KvCache* kv_cache = nullptr;
  // Mixture of experts with a load-balancing loss (model/router_balance.h, set by Model for the
  // forward it runs): the MoE blocks add their routing to it, and read its gradient in backward.
  RouterBalance* router_balance = nullptr;
};

}  // namespace zero::model
