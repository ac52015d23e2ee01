// CPU activation kernels: GELU (tanh form, GPT-2's gelu_new) and SwiGLU (Llama's
// silu(gate) * up over a fused [gate | up] row). See Backend::gelu_* / swiglu_*.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

void gelu_forward(Tensor& y, const Tensor& x);
void gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x);
void swiglu_forward(Tensor& y, const Tensor& gate_up);
void swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up);

}  // namespace zero::backend::cpu
