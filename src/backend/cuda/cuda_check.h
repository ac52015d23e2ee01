// Error checks for every CUDA runtime and cuBLASLt call of the CUDA backend. A failing call throws
// zero::Error naming the call, the file and line, and the library's own description, so a
// failure on a GPU machine says what broke without a debugger. Kernel launches are checked with
// ZERO_CUDA_CHECK(cudaGetLastError()) right after the launch (launch-configuration errors);
// faults inside a kernel surface at the next synchronising call, which is checked too.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace zero::backend::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) [[unlikely]]
    throw_cuda_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    throw_cublas_error(status, call, file, line);
}

}  // namespace zero::backend::cuda

#define ZERO_CUDA_CHECK(call) ::zero::backend::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define ZERO_CUBLAS_CHECK(call) \
  ::zero::backend::cuda::check_cublas((call), #call, __FILE__, __LINE__)
