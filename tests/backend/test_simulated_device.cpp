// The simulated device backend enforces what a GPU enforces - host code cannot touch device
// elements, kernels cannot read host tensors - counts every transfer, and computes exactly what
// the CPU backend computes.
#include <gtest/gtest.h>

#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"

namespace zero::backend {
namespace simulated_device_test {

Tensor upload(Backend& be, const std::vector<float>& values, const Shape& shape) {
  Tensor t = be.empty(shape, DType::kF32, MemoryCategory::kOther);
  be.copy_from_host(t, values.data());
  return t;
}

std::vector<float> download(Backend& be, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  be.copy_to_host(out.data(), t);
  return out;
}

TEST(SimulatedDevice, HostCodeCannotTouchDeviceElements) {
  SimulatedDeviceBackend sim;
  Tensor t = sim.zeros({4}, DType::kF32, MemoryCategory::kOther);
  EXPECT_EQ(t.device(), Device::simulated(0));
  EXPECT_THROW(t.data<float>(), Error);
  Tensor host = Tensor::zeros_host({4}, DType::kF32);
  EXPECT_NO_THROW(host.data<float>());
}

TEST(SimulatedDevice, KernelsRefuseHostTensors) {
  SimulatedDeviceBackend sim;
  Tensor device = sim.zeros({4}, DType::kF32, MemoryCategory::kOther);
  Tensor host = Tensor::zeros_host({4}, DType::kF32);
  EXPECT_THROW(sim.add(device, host, 1.0), Error);
  EXPECT_THROW(sim.fill(host, 1.0), Error);
  std::vector<float> buffer(4);
  EXPECT_THROW(sim.copy_to_host(buffer.data(), host), Error);
}

TEST(SimulatedDevice, TransfersAreCounted) {
  SimulatedDeviceBackend sim;
  Tensor x = upload(sim, {1, 2, 3, 4}, {4});
  EXPECT_EQ(sim.transfer_stats().host_to_device_calls, 1);
  EXPECT_EQ(sim.transfer_stats().host_to_device_bytes, 16);
  EXPECT_EQ(sim.squared_norm(x), 30.0);
  EXPECT_EQ(sim.transfer_stats().device_to_host_calls, 1);
  EXPECT_EQ(sim.transfer_stats().device_to_host_bytes, 8);
  sim.synchronize();
  EXPECT_EQ(sim.transfer_stats().synchronizations, 1);
  sim.reset_transfer_stats();
  EXPECT_EQ(sim.transfer_stats().host_to_device_calls, 0);
}

TEST(SimulatedDevice, ComputesWhatTheCpuBackendComputes) {
  SimulatedDeviceBackend sim;
  CpuBackend cpu;
  const std::vector<float> a = {1, -2, 3, 0.5f, 4, -1};
  const std::vector<float> b = {0.25f, 2, -1, 3, 1, 1};
  auto run = [&](Backend& be) {
    Tensor ta = upload(be, a, {2, 3});
    Tensor tb = upload(be, b, {3, 2});
    Tensor c = be.zeros({2, 2}, DType::kF32, MemoryCategory::kOther);
    be.matmul(c, ta, false, tb, false, 1.0, 0.0);
    Tensor g = be.empty({2, 3}, DType::kF32, MemoryCategory::kOther);
    be.gelu_forward(g, ta);
    Tensor total = be.empty({1}, DType::kF64, MemoryCategory::kOther);
    be.sum(total, g, 0.5, false);
    be.sum_squares(total, c, true);
    std::vector<float> out = download(be, c);
    std::vector<float> gelu = download(be, g);
    out.insert(out.end(), gelu.begin(), gelu.end());
    out.push_back(static_cast<float>(be.read_scalar(total)));
    return out;
  };
  EXPECT_EQ(run(sim), run(cpu));
}

TEST(SimulatedDevice, ScalarReductionsAccumulateInF64) {
  SimulatedDeviceBackend sim;
  Tensor x = upload(sim, {1.5f, -2.0f, 4.0f}, {3});
  Tensor out = sim.zeros({1}, DType::kF64, MemoryCategory::kOther);
  sim.sum(out, x, 2.0, false);
  EXPECT_EQ(sim.read_scalar(out), 7.0);
  sim.sum_squares(out, x, true);
  EXPECT_EQ(sim.read_scalar(out), 7.0 + 2.25 + 4.0 + 16.0);
  Tensor wrong = sim.zeros({1}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(sim.sum(wrong, x, 1.0, false), ShapeError);
}

TEST(SimulatedDevice, EventsMustBeRecordedBeforeTheyAreWaitedOn) {
  SimulatedDeviceBackend sim;
  const Event done = sim.record_event(StreamKind::kTransfer);
  EXPECT_TRUE(done.recorded());
  EXPECT_EQ(done.sequence(), 1u);
  sim.wait_event(StreamKind::kCompute, done);
  EXPECT_EQ(sim.waits_on(StreamKind::kCompute), 1);
  const Event foreign(StreamKind::kComm, 7, nullptr);
  EXPECT_THROW(sim.wait_event(StreamKind::kCompute, foreign), Error);
  sim.wait_event(StreamKind::kCompute, Event());  // a default event is complete
}

TEST(SimulatedDevice, StreamGuardRestoresTheStream) {
  SimulatedDeviceBackend sim;
  EXPECT_EQ(sim.current_stream(), StreamKind::kCompute);
  {
    StreamGuard guard(sim, StreamKind::kComm);
    EXPECT_EQ(sim.current_stream(), StreamKind::kComm);
  }
  EXPECT_EQ(sim.current_stream(), StreamKind::kCompute);
}

TEST(SimulatedDevice, PinnedHostMemoryIsHostReadableAndAccountedApart) {
  SimulatedDeviceBackend sim;
  Tensor staging = Tensor::empty(sim.pinned_host_allocator(), {256}, DType::kF32,
                                 MemoryCategory::kComm);
  EXPECT_TRUE(staging.device().is_cpu());
  staging.data<float>()[0] = 1.0f;
  EXPECT_EQ(sim.pinned_host_allocator().stats().live(MemoryCategory::kComm), 1024u);
  EXPECT_EQ(sim.allocator().stats().total_live_bytes, 0u);
}

}  // namespace simulated_device_test
}  // namespace zero::backend
