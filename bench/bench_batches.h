// Benchmark input: micro-batch `index` of step `step` as `micro` sequences of `seq_len` token
// ids drawn by xorshift from (step, index), so every rank and every run sees the same tokens.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "model/step_context.h"

namespace zero::bench {

inline model::Batch random_token_batch(int64_t step, int64_t index, int64_t micro, int64_t seq_len,
                                       int64_t vocab) {
  Tensor ids = Tensor::zeros_host({micro, seq_len}, DType::kI64);
  uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step * 1000 + index + 1);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.data<int64_t>()[i] = static_cast<int64_t>(x % static_cast<uint64_t>(vocab));
  }
  return model::batch_from_input_ids(ids);
}

}  // namespace zero::bench
