// The CUDA backend's runtime pieces: streams and events order work across streams, transfers
// are counted and wait as the interface promises, the caching allocator stops calling cudaMalloc
// once a loop repeats, pinned host memory is host-readable, and a missing device is a clear
// error. Skipped without a GPU.
#include <gtest/gtest.h>

#include "backend/backend_factory.h"
#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

class CudaRuntime : public CudaTest {};

TEST_F(CudaRuntime, TensorsLiveOnTheDeviceAndHostCodeCannotTouchThem) {
  Tensor t = gpu().zeros({4}, DType::kF32, MemoryCategory::kOther);
  EXPECT_EQ(t.device(), Device::cuda(0));
  EXPECT_THROW(t.data<float>(), Error);
  Tensor host = Tensor::zeros_host({4}, DType::kF32);
  EXPECT_THROW(gpu().add(t, host, 1.0), Error);
}

TEST_F(CudaRuntime, TransfersAreCountedAndRoundTrip) {
  const std::vector<float> values = random_values(1000, 1);
  Tensor t = upload(gpu(), values, {1000}, DType::kF32);
  EXPECT_EQ(gpu().transfer_stats().host_to_device_calls, 1);
  EXPECT_EQ(gpu().transfer_stats().host_to_device_bytes, 4000);
  std::vector<float> back(1000);
  gpu().copy_to_host(back.data(), t);
  EXPECT_EQ(back, values);
  EXPECT_EQ(gpu().transfer_stats().device_to_host_calls, 1);
  gpu().synchronize();
  EXPECT_EQ(gpu().transfer_stats().synchronizations, 1);
}

TEST_F(CudaRuntime, AnUploadOnTheTransferStreamIsOrderedBeforeComputeByAnEvent) {
  const int64_t n = 1 << 22;  // big enough that an unordered read would see the old values
  const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  Tensor x = gpu().zeros({n}, DType::kF32, MemoryCategory::kOther);
  // Streams are ordered only by events: the upload waits for compute's zero fill.
  const Event zeroed = gpu().record_event(StreamKind::kCompute);
  Event uploaded;
  {
    StreamGuard transfer(gpu(), StreamKind::kTransfer);
    gpu().wait_event(StreamKind::kTransfer, zeroed);
    gpu().copy_from_host(x, ones.data());
    uploaded = gpu().record_event(StreamKind::kTransfer);
  }
  EXPECT_TRUE(uploaded.recorded());
  EXPECT_EQ(uploaded.sequence(), 1u);  // the transfer stream's first event
  EXPECT_NE(uploaded.native(), nullptr);
  gpu().wait_event(StreamKind::kCompute, uploaded);
  Tensor total = gpu().empty({1}, DType::kF64, MemoryCategory::kOther);
  gpu().sum(total, x, 1.0, false);
  EXPECT_EQ(gpu().read_scalar(total), static_cast<double>(n));
  // Work on the comm stream, waited for by the host through its event.
  Tensor y = gpu().zeros({n}, DType::kF32, MemoryCategory::kOther);
  const Event y_zeroed = gpu().record_event(StreamKind::kCompute);
  Event done;
  {
    StreamGuard comm(gpu(), StreamKind::kComm);
    gpu().wait_event(StreamKind::kComm, y_zeroed);
    gpu().add(y, x, 2.0);
    done = gpu().record_event(StreamKind::kComm);
  }
  gpu().synchronize_event(done);
  gpu().wait_event(StreamKind::kCompute, done);
  gpu().sum(total, y, 1.0, false);
  EXPECT_EQ(gpu().read_scalar(total), 2.0 * static_cast<double>(n));
  gpu().wait_event(StreamKind::kCompute, Event());  // a default event is complete
}

TEST_F(CudaRuntime, TheCachingAllocatorStopsAllocatingOnceALoopRepeats) {
  auto step = [&] {
    Tensor a = gpu().empty({300, 200}, DType::kF32, MemoryCategory::kActivations);
    Tensor b = gpu().empty({200, 100}, DType::kF32, MemoryCategory::kActivations);
    Tensor c = gpu().empty({300, 100}, DType::kF32, MemoryCategory::kActivations);
    gpu().fill(a, 0.5);
    gpu().fill(b, 0.25);
    gpu().matmul(c, a, false, b, false, 1.0, 0.0);
    Tensor total = gpu().empty({1}, DType::kF64, MemoryCategory::kWorkspace);
    gpu().sum(total, c, 1.0, false);
    return gpu().read_scalar(total);
  };
  EXPECT_DOUBLE_EQ(step(), 300.0 * 100.0 * 200.0 * 0.125);
  step();
  const CacheStats warm = gpu().caching_allocator().cache_stats();
  const size_t live = gpu().allocator().stats().total_live_bytes;
  for (int i = 0; i < 5; ++i) step();
  const CacheStats later = gpu().caching_allocator().cache_stats();
  EXPECT_EQ(later.raw_allocations, warm.raw_allocations);
  EXPECT_GT(later.cache_hits, warm.cache_hits);
  EXPECT_EQ(gpu().allocator().stats().total_live_bytes, live);
  EXPECT_GT(gpu().allocator().stats().peak(MemoryCategory::kActivations), 0u);
}

TEST_F(CudaRuntime, PinnedHostMemoryIsHostReadableAndAccountedApart) {
  Tensor staging =
      Tensor::empty(gpu().pinned_host_allocator(), {256}, DType::kF32, MemoryCategory::kOther);
  EXPECT_TRUE(staging.device().is_cpu());
  staging.data<float>()[0] = 3.0f;
  Tensor device = gpu().empty({256}, DType::kF32, MemoryCategory::kOther);
  gpu().copy_from_host(device, staging.raw_data());
  float back = 0.0f;
  gpu().copy_to_host(&back, device.view(0, {1}));
  EXPECT_EQ(back, 3.0f);
  EXPECT_EQ(gpu().pinned_host_allocator().stats().total_live_bytes, 1024u);
}

TEST_F(CudaRuntime, TheFactoryCreatesTheCudaBackend) {
  const std::unique_ptr<Backend> backend = create_backend("cuda:0");
  EXPECT_EQ(backend->device(), Device::cuda(0));
  EXPECT_THROW(create_backend("cuda:x"), ConfigError);
  EXPECT_THROW(create_backend("cuda:" + std::to_string(cuda_device_count())), Error);
}

}  // namespace
}  // namespace zero::backend::cuda_test
