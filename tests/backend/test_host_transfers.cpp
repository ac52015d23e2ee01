// Backend::copy_to_pinned_async and copy_from_pinned_async, the transfers a device backend does
// not wait for: on the synchronous backends they are done on return and counted like
// copy_to_host / copy_from_host; any host side but a contiguous tensor of the device tensor's
// bytes from the backend's pinned host allocator is refused with a ShapeError that says what it
// must be (the host would otherwise touch memory a device DMA may still be using, or the copy
// would be a hidden synchronous one).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"

namespace zero::backend {
namespace {

Tensor ramp(Backend& backend, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  Tensor t = backend.empty({n}, DType::kF32, MemoryCategory::kOther);
  backend.copy_from_host(t, values.data());
  return t;
}

void expect_download(Backend& backend) {
  Tensor src = ramp(backend, 100);
  Tensor dst = Tensor::empty(backend.pinned_host_allocator(), {100}, DType::kF32,
                             MemoryCategory::kOther);
  backend.reset_transfer_stats();
  backend.copy_to_pinned_async(dst, src);
  const Event done = backend.record_event(backend.current_stream());
  backend.synchronize_event(done);
  EXPECT_EQ(dst.data<float>()[0], 0.0f);
  EXPECT_EQ(dst.data<float>()[99], 49.5f);
  EXPECT_EQ(backend.transfer_stats().device_to_host_calls, 1);
  EXPECT_EQ(backend.transfer_stats().device_to_host_bytes, 400);
}

void expect_upload(Backend& backend) {
  Tensor src = Tensor::empty(backend.pinned_host_allocator(), {100}, DType::kF32,
                             MemoryCategory::kOther);
  for (int64_t i = 0; i < 100; ++i) src.data<float>()[i] = 0.5f * static_cast<float>(i);
  Tensor dst = backend.empty({100}, DType::kF32, MemoryCategory::kOther);
  backend.reset_transfer_stats();
  backend.copy_from_pinned_async(dst, src);
  backend.synchronize_event(backend.record_event(backend.current_stream()));
  EXPECT_EQ(backend.transfer_stats().host_to_device_calls, 1);
  EXPECT_EQ(backend.transfer_stats().host_to_device_bytes, 400);
  std::vector<float> back(100);
  backend.copy_to_host(back.data(), dst);
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[99], 49.5f);
}

TEST(CopyToPinnedAsync, DownloadsAndCountsOnTheCpuBackend) {
  CpuBackend cpu;
  expect_download(cpu);
}

TEST(CopyToPinnedAsync, DownloadsAndCountsOnTheSimulatedDevice) {
  SimulatedDeviceBackend sim;
  expect_download(sim);
}

TEST(CopyFromPinnedAsync, UploadsAndCountsOnBothSynchronousBackends) {
  CpuBackend cpu;
  expect_upload(cpu);
  SimulatedDeviceBackend sim;
  expect_upload(sim);
}

TEST(CopyFromPinnedAsync, RefusesASourceThatIsNotPinned) {
  SimulatedDeviceBackend sim;
  Tensor dst = sim.empty({64}, DType::kF32, MemoryCategory::kOther);
  Tensor pageable = Tensor::zeros_host({64}, DType::kF32);
  try {
    sim.copy_from_pinned_async(dst, pageable);
    FAIL() << "a pageable source was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("copy_from_pinned_async: source"), std::string::npos) << message;
    EXPECT_NE(message.find("pinned host allocator"), std::string::npos) << message;
  }
  EXPECT_EQ(sim.transfer_stats().host_to_device_calls, 0);
}

std::string refusal(Backend& backend, Tensor dst, const Tensor& src) {
  try {
    backend.copy_to_pinned_async(dst, src);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CopyToPinnedAsync, RefusesADestinationThatIsNotPinnedOrNotTheSameBytes) {
  SimulatedDeviceBackend sim;
  Tensor src = ramp(sim, 64);
  const std::string pageable = refusal(
      sim, Tensor::empty(cpu_allocator(), {64}, DType::kF32, MemoryCategory::kOther), src);
  EXPECT_NE(pageable.find("pinned host allocator"), std::string::npos) << pageable;
  const std::string shorter = refusal(
      sim, Tensor::empty(sim.pinned_host_allocator(), {63}, DType::kF32, MemoryCategory::kOther),
      src);
  EXPECT_NE(shorter.find("exactly the bytes"), std::string::npos) << shorter;
  Tensor wide = Tensor::empty(sim.pinned_host_allocator(), {8, 16}, DType::kF32,
                              MemoryCategory::kOther);
  const std::string strided = refusal(sim, wide.narrow(1, 0, 8), src);
  EXPECT_NE(strided.find("contiguous"), std::string::npos) << strided;
  EXPECT_EQ(sim.transfer_stats().device_to_host_calls, 0) << "a refused copy was counted";
}

}  // namespace
}  // namespace zero::backend
