#include "model/step_context.h"

#include "core/error.h"

namespace zero::model {

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
