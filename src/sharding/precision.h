// Precision of the model states ZeRO manages, resolved from the config the way DeepSpeed 0.19
// resolves it (engine.get_data_types / communication_data_type):
//   param  storage dtype of parameters and of each micro-batch's gradients: f32, or bf16/fp16
//          when that section is enabled;
//   accum  gradient accumulation (data_types.grad_accum_dtype; default: f32 for bf16 without
//          ZeRO, the param dtype otherwise);
//   comm   gradient communication (communication_data_type; default: the param dtype).
//   master the optimizer's copy of the weights and its gradient partition: f32, or bf16 with
//          bf16.bf16_master_weights_and_grads (ZeRO stages >= 1);
//   states optimizer states (Adam's moments, ...): f32, or bf16 with bf16.bf16_optimizer_states;
//   stochastic_rounding  commit updates to bf16 master weights by stochastic rounding instead of
//          round-to-nearest-even (bf16.stochastic_rounding, a zero.cpp extension), with random
//          bits from (step, element) so every rank and stage agrees.
// ZeroStage rejects combinations it cannot run (bf16 master weights without bf16 parameters or
// at stage 0, bf16 states or stochastic rounding without bf16 master weights).
// Activations are stored in the param dtype as well (Model::set_activation_dtype). The CPU
// backend computes in f32; every value stored in 16 bits is rounded to 16 bits where the GPU
// path stores it (dtype_ops.h, backend/cpu/cpu_f32_twins.h).
#pragma once
#include "core/dtype.h"

namespace zero::sharding {

struct Precision {
  DType param = DType::kF32;
  DType accum = DType::kF32;
  DType comm = DType::kF32;
  DType master = DType::kF32;
  DType states = DType::kF32;
  bool stochastic_rounding = false;
  bool mixed() const { return param != DType::kF32; }
};

}  // namespace zero::sharding
