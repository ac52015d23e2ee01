// CPU optimizer updates over flat f32 buffers (Adam/AdamW, Lamb, Lion, Adagrad). The
// semantics — DeepSpeed's — are documented on each kind in cpu_optimizers.cpp; src/optim
// decides hyper-parameters. See Backend::optimizer_update.
#pragma once
#include <span>

#include "backend/optimizer_kernels.h"
#include "core/tensor.h"

namespace zero::backend::cpu {

void optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                      std::span<Tensor> state, std::span<const ParamSegment> segments,
                      const OptimizerHyper& hyper);

}  // namespace zero::backend::cpu
