// GradientReducer with overlap_comm: buckets whose reduction has finished are taken in at the
// next add() - while backward goes on - not only at flush(); under optimizer offload that is
// when each bucket's gradients leave the device for the host partition. SelfComm's asynchronous
// collectives finish at once, so every bucket but the open one is in before flush().
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/self_comm.h"
#include "engine/zero_harness.h"
#include "sharding/gradient_reducer.h"

namespace zero::sharding {
namespace {

TEST(GradientReducer, FinishedBucketsAreTakenInDuringBackward) {
  backend::CpuBackend device;
  backend::CpuBackend host(host_pageable_allocator());
  comm::SelfComm comm;
  auto model = engine::zero_test::small_model("llama", device);
  const PartitionLayout layout(*model, 1, 0);
  const size_t units = layout.units().size();
  ASSERT_GE(units, 3u);
  for (const bool offloaded : {false, true}) {
    backend::Backend& sink = offloaded ? static_cast<backend::Backend&>(host) : device;
    Tensor partition = sink.zeros({layout.partition_numel()}, DType::kF32, MemoryCategory::kGrads);
    ExposedCommTime exposed;
    // One unit per bucket: each add() launches a bucket.
    GradientReducer reducer(device, comm, layout, 1, /*overlap=*/true, DType::kF32, exposed, {},
                            offloaded ? &host : nullptr);
    std::vector<Tensor> grads;
    for (size_t u = units; u-- > 0;) {  // backward order
      Tensor g = device.empty({layout.unit(u).padded_numel}, DType::kF32, MemoryCategory::kComm);
      device.fill(g, static_cast<double>(u + 1));
      grads.push_back(g);
      reducer.add(u, g, partition);
      // Every bucket launched before this add() is already in the partition.
      for (size_t v = u + 1; v < units; ++v) {
        const UnitPartition& part = layout.unit(v);
        const float first = static_cast<const float*>(partition.raw_data())[part.partition_offset];
        EXPECT_EQ(first, static_cast<float>(v + 1)) << "unit " << v << " offloaded " << offloaded;
      }
    }
    reducer.flush(partition);
    const float last = static_cast<const float*>(partition.raw_data())[layout.unit(0).partition_offset];
    EXPECT_EQ(last, 1.0f);
  }
}

}  // namespace
}  // namespace zero::sharding
