// StepContext: what units read while running one micro-batch: the backend, the batch, and
// flags. Units keep their own saved activations; the context only carries per-step inputs.
#pragma once
#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "core/tensor.h"

namespace zero::model {

inline constexpr int64_t kIgnoreIndex = -100;  // targets equal to this contribute no loss

// One micro-batch of token ids on the host: tokens and targets are i32 or i64 [B, T];
// targets[b, t] is the token that should follow tokens[b, t] (kIgnoreIndex to skip).
struct Batch {
  Tensor tokens;
  Tensor targets;
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
  // d(objective)/d(loss) for the loss unit's backward (set by Model::backward).
  double loss_grad = 1.0;
};

}  // namespace zero::model
