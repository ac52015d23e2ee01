#include "backend/cuda/cuda_check.h"

#include <string>

#include "backend/cuda/cublaslt_library.h"
#include "core/error.h"

namespace zero::backend::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clear a non-sticky error so the next call does not report it again; a sticky one (a fault
  // inside a kernel) stays and every later call fails the same way: the process must restart.
  cudaGetLastError();
  throw Error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ") from " + call + " at " + file + ":" +
              std::to_string(line) +
              (status == cudaErrorMemoryAllocation
                   ? "; the GPU is out of memory: lower the micro-batch size or sequence length, "
                     "or use ZeRO stages / activation checkpointing"
                   : ""));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(std::string("cuBLASLt error ") + cublaslt().status_name(status) + " (" +
              cublaslt().status_string(status) + ") from " + call + " at " + file + ":" +
              std::to_string(line));
}

}  // namespace zero::backend::cuda
