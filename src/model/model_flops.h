// Training FLOPs of a transformer: what MFU and achieved-FLOP/s figures divide by. Counts the
// multiply-adds of every matrix product (x2 for FLOPs) and the causal attention products;
// forward + backward = 3 x forward (backward does two products per forward product).
#pragma once
#include <cstdint>

#include "model/transformer_config.h"

namespace zero::model {

struct StepFlops {
  double matmul = 0.0;     // linears and the LM head
  double attention = 0.0;  // QK^T and PV (causal half), forward + backward
  double total() const { return matmul + attention; }
};

// FLOPs of forward + backward over `batch` sequences of `seq_len` tokens.
StepFlops training_flops(const TransformerConfig& config, int64_t batch, int64_t seq_len);

}  // namespace zero::model
