// The CUDA backend's streams overlap: on the simulator in lazy order (work runs only when the
// host forces it, include/cuda_sim/streams.h), compute work and the host never wait for a
// download on the transfer stream that nothing asked them to wait for, and device blocks stay
// with the stream they were allocated on. On a GPU these are races against time, so they are
// proven here, where "not yet run" is observable.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_sim/streams.h"

namespace zero::backend {
namespace {

class CudaBackendOverlap : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = ::cuda_sim::stream_order();
    ::cuda_sim::set_stream_order(::cuda_sim::StreamOrder::kLazy);
    gpu_ = std::make_unique<CudaBackend>(0);
  }
  void TearDown() override {
    gpu_.reset();
    ::cuda_sim::set_stream_order(previous_);
  }
  CudaBackend& gpu() { return *gpu_; }

 private:
  ::cuda_sim::StreamOrder previous_ = ::cuda_sim::StreamOrder::kEager;
  std::unique_ptr<CudaBackend> gpu_;
};

TEST_F(CudaBackendOverlap, ADownloadOnTheTransferStreamHoldsUpNeitherComputeNorTheHost) {
  Tensor x = gpu().zeros({1024}, DType::kF32, MemoryCategory::kOther);
  Tensor host = Tensor::empty(gpu().pinned_host_allocator(), {1024}, DType::kF32,
                              MemoryCategory::kOther);
  for (int64_t i = 0; i < 1024; ++i) host.data<float>()[i] = -1.0f;
  const Event zeroed = gpu().record_event(StreamKind::kCompute);
  Event downloaded;
  {
    StreamGuard transfer(gpu(), StreamKind::kTransfer);
    gpu().wait_event(StreamKind::kTransfer, zeroed);
    gpu().copy_to_pinned_async(host, x);
    downloaded = gpu().record_event(StreamKind::kTransfer);
  }
  // Compute work after the switch back, read by the host: it runs, the download does not.
  Tensor y = gpu().empty({1024}, DType::kF32, MemoryCategory::kOther);
  gpu().fill(y, 3.0);
  Tensor total = gpu().empty({1}, DType::kF64, MemoryCategory::kOther);
  gpu().sum(total, y, 1.0, false);
  EXPECT_EQ(gpu().read_scalar(total), 3.0 * 1024);
  EXPECT_EQ(host.data<float>()[0], -1.0f) << "compute or the host waited for the download";
  gpu().synchronize_event(downloaded);
  EXPECT_EQ(host.data<float>()[0], 0.0f);
  EXPECT_EQ(host.data<float>()[1023], 0.0f);
}

TEST_F(CudaBackendOverlap, AnUploadFromPinnedMemoryDoesNotHoldUpTheHost) {
  Tensor host = Tensor::empty(gpu().pinned_host_allocator(), {256}, DType::kF32,
                              MemoryCategory::kOther);
  for (int64_t i = 0; i < 256; ++i) host.data<float>()[i] = 2.0f;
  Tensor x;
  Event uploaded;
  {
    StreamGuard transfer(gpu(), StreamKind::kTransfer);
    x = gpu().empty({256}, DType::kF32, MemoryCategory::kOther);
    gpu().copy_from_pinned_async(x, host);
    uploaded = gpu().record_event(StreamKind::kTransfer);
  }
  EXPECT_EQ(::cudaEventQuery(static_cast<cudaEvent_t>(uploaded.native().get())),
            cudaErrorNotReady)
      << "the host waited for the upload";
  gpu().wait_event(StreamKind::kCompute, uploaded);
  Tensor total = gpu().empty({1}, DType::kF64, MemoryCategory::kOther);
  gpu().sum(total, x, 1.0, false);
  EXPECT_EQ(gpu().read_scalar(total), 512.0);
}

TEST_F(CudaBackendOverlap, ABlockStaysWithTheStreamItWasAllocatedOn) {
  CachingAllocator& cache = gpu().caching_allocator();
  Tensor batch;
  {
    StreamGuard transfer(gpu(), StreamKind::kTransfer);
    batch = gpu().empty({4096}, DType::kF32, MemoryCategory::kActivations);
    gpu().fill(batch, 1.0);
  }
  batch = Tensor();  // freed by the compute stream, the batch's reader
  EXPECT_EQ(cache.cache_stats().cross_stream_frees, 1);
  const int64_t raw = cache.cache_stats().raw_allocations;
  Tensor compute_tensor = gpu().empty({4096}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_EQ(cache.cache_stats().raw_allocations, raw + 1) << "compute took the transfer block";
  {
    StreamGuard transfer(gpu(), StreamKind::kTransfer);
    Tensor next = gpu().empty({4096}, DType::kF32, MemoryCategory::kActivations);
    EXPECT_EQ(cache.cache_stats().raw_allocations, raw + 1) << "the transfer block was not reused";
  }
}

TEST_F(CudaBackendOverlap, PinnedBuffersAreCachedNotReallocatedEveryStep) {
  for (int step = 0; step < 5; ++step) {
    Tensor staging = Tensor::empty(gpu().pinned_host_allocator(), {10000}, DType::kF32,
                                   MemoryCategory::kComm);
    staging.data<float>()[0] = static_cast<float>(step);
  }
  const cuda::PinnedCacheStats stats = gpu().pinned_cache().cache_stats();
  EXPECT_EQ(stats.raw_allocations, 1);
  EXPECT_EQ(stats.cache_hits, 4);
}

TEST_F(CudaBackendOverlap, APinnedBufferIsNotHandedOutWhileACopyMayStillWriteIt) {
  Tensor x = gpu().empty({256}, DType::kF32, MemoryCategory::kOther);
  gpu().fill(x, 7.0);
  Tensor host = Tensor::empty(gpu().pinned_host_allocator(), {256}, DType::kF32,
                              MemoryCategory::kOther);
  for (int64_t i = 0; i < 256; ++i) host.data<float>()[i] = -1.0f;
  gpu().copy_to_pinned_async(host, x);  // pending (lazy streams)
  EXPECT_EQ(host.data<float>()[0], -1.0f);
  host = Tensor();  // freed with the download still queued
  Tensor next = Tensor::empty(gpu().pinned_host_allocator(), {256}, DType::kF32,
                              MemoryCategory::kOther);
  // The same block, handed out only once the download into it was done: the new user's writes
  // cannot be overwritten by it later.
  EXPECT_EQ(gpu().pinned_cache().cache_stats().cache_hits, 1);
  EXPECT_EQ(gpu().pinned_cache().cache_stats().host_waits, 1);
  EXPECT_EQ(next.data<float>()[0], 7.0f);
  EXPECT_EQ(next.data<float>()[255], 7.0f);
}

}  // namespace
}  // namespace zero::backend
