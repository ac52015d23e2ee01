// The FLOP formula table of a transformer: one row per operation of every unit (embedding, each
// block's projections, causal attention products and MLP, the final norm and LM head), with the
// parameters it owns and its forward multiply-adds. It is the one source of FLOP counts: the MFU
// and achieved-FLOP/s figures (training_flops) and the flops profiler (engine/flops_profiler.h)
// both read it, so their totals agree by construction.
//
// Convention (the one MFU figures use): only matrix products are counted. A product of an
// [m, k] by a [k, n] matrix is m*k*n multiply-adds (MACs) and 2 FLOPs per MAC; its backward does
// two such products (input gradient and weight gradient), so backward = 2 x forward and
// forward + backward = 3 x forward. Causal attention counts half of the T x T score matrix:
// QK^T and PV each cost T^2/2 * head_dim MACs per head and sequence. Element-wise work (norms,
// activations, softmax, the loss, residual adds, embedding lookups) is listed with its parameters
// but counts 0 FLOPs. Activation checkpointing's recomputed forward is not counted (as in MFU).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer_config.h"

namespace zero::model {

// One operation of a unit. Counts are doubles: a big model's per-step FLOPs pass 2^63.
struct OpFlops {
  std::string name;          // e.g. "qkv projection", "attention scores QK^T (causal)"
  double params = 0.0;       // parameters this op owns (0 for a tied LM head: the embedding owns them)
  double forward_macs = 0.0;  // multiply-adds of one forward pass over the whole batch
  bool attention = false;    // a QK^T / PV product (no weights), else a weight product
  double forward_flops() const { return 2.0 * forward_macs; }
  double backward_flops() const { return 2.0 * forward_flops(); }
  double training_flops() const { return forward_flops() + backward_flops(); }
};

// One unit of the model, named as Unit::name() names it ("embedding", "block<i>", "lm_head").
struct UnitFlops {
  std::string name;
  std::vector<OpFlops> ops;
  double params() const;
  double forward_macs() const;
  double forward_flops() const { return 2.0 * forward_macs(); }
  double backward_flops() const { return 2.0 * forward_flops(); }
  double training_flops() const { return forward_flops() + backward_flops(); }
};

// The table for forward + backward over `batch` sequences of `seq_len` tokens: one entry per
// unit of the model build_transformer() makes from `config`, in the same order.
std::vector<UnitFlops> unit_flops(const TransformerConfig& config, int64_t batch, int64_t seq_len);

struct StepFlops {
  double matmul = 0.0;     // linears and the LM head, forward + backward
  double attention = 0.0;  // QK^T and PV (causal half), forward + backward
  double total() const { return matmul + attention; }
};

// Sums of a table (what MFU divides by).
StepFlops total_flops(const std::vector<UnitFlops>& units);
// FLOPs of forward + backward over `batch` sequences of `seq_len` tokens: total_flops of the
// table above.
StepFlops training_flops(const TransformerConfig& config, int64_t batch, int64_t seq_len);

}  // namespace zero::model
