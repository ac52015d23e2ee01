// CPU 1-bit compression with error feedback: Backend::onebit_worker_compress,
// onebit_server_compress and onebit_decompress (semantics in backend.h, layout in
// backend/onebit_layout.h). Norms are summed in f64 over fixed blocks in block order, so the bits
// do not depend on the thread count.
#pragma once
#include "backend/onebit_layout.h"
#include "core/tensor.h"

namespace zero::backend::cpu {

void onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                            const Tensor& values, const OneBitLayout& layout);
void onebit_server_compress(Tensor& bits_out, Tensor& scales_out, Tensor& server_error,
                            const Tensor& bits_in, const Tensor& scales_in,
                            const OneBitLayout& layout);
void onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                       const OneBitLayout& layout);

}  // namespace zero::backend::cpu
