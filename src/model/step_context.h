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

// Builds targets the way Hugging Face does from labels == input_ids: targets[b, t] =
// tokens[b, t + 1] and the last position ignored.
Batch batch_from_input_ids(const Tensor& input_ids);

struct StepContext {
  backend::Backend& backend;
  const Batch& batch;
  bool training = true;  // false: no state is saved for backward, no gradients
  // When set, the head unit copies the logits [B*T, V] here (tests and evaluation).
  Tensor* capture_logits = nullptr;
  // The dtype activations are stored in (set by Model from Model::activation_dtype(); unset:
  // the parameters' dtype). Mixed precision stores them in bf16/fp16 as a GPU run does.
  std::optional<DType> activation_dtype = std::nullopt;
};

}  // namespace zero::model
