#include "model/step_context.h"

#include <string>

#include "core/error.h"

namespace zero::model {
namespace {

int64_t id_at(const Tensor& ids, int64_t i) {
  return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
}

void check_ids(const Tensor& ids, const char* what, std::optional<int64_t> vocab_size,
               bool allow_ignore, int64_t* valid) {
  const int64_t n = ids.numel();
  const int64_t columns = ids.size(1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = id_at(ids, i);
    if (allow_ignore && id == kIgnoreIndex) continue;
    ++*valid;
    if (vocab_size && (id < 0 || id >= *vocab_size)) {
      throw Error(std::string(what) + " id " + std::to_string(id) + " at [" +
                  std::to_string(i / columns) + ", " + std::to_string(i % columns) +
                  "] is outside the vocabulary [0, " + std::to_string(*vocab_size) + ")" +
                  (allow_ignore ? " and is not the ignore index -100" : "") +
                  "; the data was prepared for a different tokenizer or model");
    }
  }
}

}  // namespace

DeviceBatch upload_batch(backend::Backend& backend, const Batch& batch,
                         std::optional<int64_t> vocab_size) {
  auto usable = [](const Tensor& t) {
    return t.defined() && t.dim() == 2 && t.is_contiguous() && t.device().is_cpu() &&
           (t.dtype() == DType::kI32 || t.dtype() == DType::kI64);
  };
  if (!usable(batch.tokens) || !usable(batch.targets) ||
      batch.tokens.shape() != batch.targets.shape()) {
    throw ShapeError("a batch needs contiguous host i32/i64 tokens and targets of one [B, T] "
                     "shape, got tokens " +
                     (batch.tokens.defined() ? batch.tokens.describe() : std::string("undefined")) +
                     " and targets " +
                     (batch.targets.defined() ? batch.targets.describe() : std::string("undefined")));
  }
  DeviceBatch out;
  int64_t token_count = 0;
  check_ids(batch.tokens, "token", vocab_size, false, &token_count);
  check_ids(batch.targets, "target", vocab_size, true, &out.valid_targets);
  if (batch.loss_valid_targets) out.valid_targets = *batch.loss_valid_targets;
  const int64_t rows = batch.tokens.numel();
  {
    // Allocated on the transfer stream, which writes them: the allocator then reuses the blocks
    // for the next batch only after the compute stream's reads of this one (backend.h).
    backend::StreamGuard on_transfer(backend, backend::StreamKind::kTransfer);
    out.tokens = backend.empty({rows}, batch.tokens.dtype(), MemoryCategory::kActivations);
    out.targets = backend.empty({rows}, batch.targets.dtype(), MemoryCategory::kActivations);
    backend.copy_from_host(out.tokens, batch.tokens.raw_data());
    backend.copy_from_host(out.targets, batch.targets.raw_data());
  }
  backend.wait_event(backend::StreamKind::kCompute,
                     backend.record_event(backend::StreamKind::kTransfer));
  return out;
}

DeviceBatch upload_tokens(backend::Backend& backend, const Tensor& tokens,
                          std::optional<int64_t> vocab_size) {
  if (!tokens.defined() || tokens.dim() != 2 || !tokens.is_contiguous() ||
      !tokens.device().is_cpu() ||
      (tokens.dtype() != DType::kI32 && tokens.dtype() != DType::kI64)) {
    throw ShapeError("token ids must be a contiguous host i32/i64 [B, T] tensor, got " +
                     (tokens.defined() ? tokens.describe() : std::string("undefined")));
  }
  DeviceBatch out;
  int64_t token_count = 0;
  check_ids(tokens, "token", vocab_size, false, &token_count);
  {
    // On the transfer stream, as upload_batch's copies (and for the same reuse rule).
    backend::StreamGuard on_transfer(backend, backend::StreamKind::kTransfer);
    out.tokens = backend.empty({tokens.numel()}, tokens.dtype(), MemoryCategory::kActivations);
    backend.copy_from_host(out.tokens, tokens.raw_data());
  }
  backend.wait_event(backend::StreamKind::kCompute,
                     backend.record_event(backend::StreamKind::kTransfer));
  return out;
}

Batch batch_from_input_ids(const Tensor& input_ids) {
  if (input_ids.dim() != 2 || !input_ids.is_contiguous() ||
      (input_ids.dtype() != DType::kI64 && input_ids.dtype() != DType::kI32)) {
    throw ShapeError("input_ids must be a contiguous i32/i64 [B, T] tensor, got " +
                     input_ids.describe());
  }
  Batch batch;
  batch.tokens = input_ids;
  batch.targets = Tensor::zeros_host(input_ids.shape(), DType::kI64);
  const int64_t rows = input_ids.size(0);
  const int64_t cols = input_ids.size(1);
  int64_t* targets = batch.targets.data<int64_t>();
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t t = 0; t < cols; ++t) {
      int64_t next = kIgnoreIndex;
      if (t + 1 < cols) {
        const int64_t i = b * cols + t + 1;
        next = input_ids.dtype() == DType::kI64 ? input_ids.data<int64_t>()[i]
                                                : input_ids.data<int32_t>()[i];
      }
      targets[b * cols + t] = next;
    }
  }
  return batch;
}

}  // namespace zero::model
