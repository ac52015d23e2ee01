// int8 group quantization on the CUDA backend: argument checks shared with the CPU
// (backend/int8_groups.h), placement checks, then the kernels of cuda_int8_groups.cu.
#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/int8_groups.h"

namespace zero::backend {

using cuda_internal::Checks;

void CudaBackend::quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) {
  const char* op = "quantize_int8_groups";
  const Checks check(device(), op);
  check.here(packed, "packed").here(values, "values");
  const Int8Groups layout = check_int8_groups_args(op, values, packed, group);
  cuda::launch_quantize_int8_groups(static_cast<uint8_t*>(packed.raw_data()), values.raw_data(),
                                    values.dtype(), layout.count, group, current());
}

void CudaBackend::dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                                         bool accumulate) {
  const char* op = "dequantize_int8_groups";
  const Checks check(device(), op);
  check.here(values, "values").here(packed, "packed");
  const Int8Groups layout = check_int8_groups_args(op, values, packed, group);
  cuda::launch_dequantize_int8_groups(values.raw_data(), values.dtype(),
                                      static_cast<const uint8_t*>(packed.raw_data()), layout.count,
                                      group, accumulate, current());
}

}  // namespace zero::backend
