// CPU embedding lookup and its deterministic scatter-add backward. Semantics are those of the
// Backend methods of the same name (backend/backend.h); CpuBackend forwards to these.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

// out[..., C] = table[ids[...], :] (out += ... when accumulate). ids: i32 or i64 with one id per
// row of out; table [V, C]. An id outside [0, V) throws zero::Error before anything is written.
void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table, bool accumulate);
// dtable[V, C] += dout rows scattered by ids; bitwise reproducible for any thread count.
void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids);

}  // namespace zero::backend::cpu
