// SelfComm: the one-rank group behaves like N = 1 of every collective (copies, identity
// reductions), counts calls without traffic, and a one-rank Mesh has trivial groups.
#include <gtest/gtest.h>

#include "backend/sim/simulated_device_backend.h"
#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "core/error.h"

namespace zero::comm {
namespace {

Tensor iota(int64_t n) {
  Tensor t = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(SelfComm, CollectivesAreIdentities) {
  SelfComm comm;
  Tensor a = iota(5);
  comm.all_reduce(a, ReduceOp::kSum);
  EXPECT_EQ(a.data<float>()[4], 4.0f);
  Tensor out = Tensor::zeros_host({5}, DType::kF32);
  comm.reduce_scatter(a, out, ReduceOp::kSum);
  EXPECT_EQ(out.data<float>()[3], 3.0f);
  Tensor gathered = Tensor::zeros_host({5}, DType::kF32);
  comm.all_gather_async(a, gathered)->wait();
  EXPECT_EQ(gathered.data<float>()[2], 2.0f);
  EXPECT_DOUBLE_EQ(comm.all_reduce_scalar(2.5, ReduceOp::kMax), 2.5);
  EXPECT_THROW(comm.send(a, 1, 0), Error);
  EXPECT_EQ(comm.stats().at(OpKind::kAllReduce).calls, 2);  // tensor + scalar
  EXPECT_EQ(comm.stats().at(OpKind::kAllGather).calls, 1);
  EXPECT_EQ(comm.stats().total_traffic_bytes(), 0);
  comm.reset_stats();
  EXPECT_EQ(comm.stats().at(OpKind::kAllReduce).calls, 0);
}

TEST(Mesh, OneRankAndBadShapes) {
  SelfComm world;
  Mesh mesh(world, {});
  EXPECT_EQ(mesh.group(MeshAxis::kData).world_size(), 1);
  EXPECT_EQ(mesh.coordinate(MeshAxis::kTensor), 0);
  try {
    Mesh bad(world, MeshShape{1, 2, 1, 1});
    FAIL() << "a 2-rank layout was accepted on 1 rank";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("job has 1"), std::string::npos) << e.what();
  }
  // DeepSpeed's order: pipe slowest, tensor fastest.
  const MeshShape shape{2, 2, 1, 2};
  EXPECT_EQ(Mesh::rank_of(shape, 0, 0, 0, 1), 1);
  EXPECT_EQ(Mesh::rank_of(shape, 0, 1, 0, 0), 2);
  EXPECT_EQ(Mesh::rank_of(shape, 1, 0, 0, 0), 4);
}

TEST(SelfComm, DeviceTensorsAreCopiedByTheirBackend) {
  // Simulated device memory is host memory: copied directly, with or without the backend.
  backend::SimulatedDeviceBackend sim;
  Tensor in = sim.empty({4}, DType::kF32, MemoryCategory::kComm);
  Tensor out = sim.zeros({4}, DType::kF32, MemoryCategory::kComm);
  const float values[4] = {1, 2, 3, 4};
  sim.copy_from_host(in, values);
  SelfComm with_backend(&sim);
  with_backend.all_gather(in, out);
  float back[4] = {};
  sim.copy_to_host(back, out);
  EXPECT_EQ(back[3], 4.0f);
  // A GPU tensor cannot be moved with memmove: without its backend the copy is refused.
  float fake[4] = {};
  Tensor gpu_out = Tensor::borrow(fake + 2, {2}, DType::kF32, Device::cuda(0), nullptr);
  Tensor gpu_full = Tensor::borrow(fake, {2}, DType::kF32, Device::cuda(0), nullptr);
  SelfComm plain;
  EXPECT_THROW(plain.reduce_scatter(gpu_full, gpu_out, ReduceOp::kSum), Error);
}

}  // namespace
}  // namespace zero::comm
