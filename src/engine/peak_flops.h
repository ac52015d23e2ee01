// The FLOP/s that MFU divides by, measured on the run's own backend at the start of the run:
// the best of a few square matrix products in the dtype the model's matmuls run in on that
// device. On a GPU that is bf16 (the "MFU against the bf16 matmul rate"; 8192^3 products,
// about 20 ms on an H100); on the CPU and the simulated device, where no datasheet number is
// reliable, f32 at 512^3 (about 0.2 s): MFU there means "fraction of this machine's matmul rate".
#pragma once
#include "backend/backend.h"
#include "core/dtype.h"

namespace zero::engine {

struct MatmulPeak {
  double flops_per_second = 0.0;
  DType dtype = DType::kF32;  // the dtype of the measured products
  int64_t size = 0;           // n of the n x n x n products
};

// `size` 0 picks the device's default (8192 on CUDA, 512 elsewhere). The matrices are
// workspace tensors freed before returning.
MatmulPeak measure_matmul_peak(backend::Backend& backend, int64_t size = 0);

}  // namespace zero::engine
