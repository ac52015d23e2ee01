#include "backend/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"

namespace zero::backend::cuda {

void* CudaDeviceMemory::allocate(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);  // 256-byte aligned, as RawMemory promises
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so later calls do not report it
    return nullptr;
  }
  ZERO_CUDA_CHECK(status);
  return ptr;
}

void CudaDeviceMemory::free(void* ptr, size_t /*bytes*/) {
  // Runs from destructors (the cache emptying at shutdown): never throws. cudaFree waits for the
  // device, so no kernel still uses the block.
  if (ptr != nullptr && cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

}  // namespace zero::backend::cuda
