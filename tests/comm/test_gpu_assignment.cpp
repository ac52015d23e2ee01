// How a multi-process GPU job picks each rank's GPU and decides between NCCL and host staging:
// one GPU per rank by UUID (however CUDA_VISIBLE_DEVICES numbered them), any shared or missing
// GPU sending the whole job to host staging.
#include <gtest/gtest.h>

#include <vector>

#include "comm/gpu_assignment.h"

namespace zero::comm {
namespace {

TEST(GpuAssignment, ARankSeeingOneGpuTakesItWhateverItsLocalRank) {
  EXPECT_EQ(candidate_gpu(0, 1), 0);
  EXPECT_EQ(candidate_gpu(3, 1), 0);  // Slurm --gpus-per-task: each rank sees its own as 0
}

TEST(GpuAssignment, ARankSeeingSeveralTakesItsLocalRanks) {
  EXPECT_EQ(candidate_gpu(0, 8), 0);
  EXPECT_EQ(candidate_gpu(7, 8), 7);
  EXPECT_EQ(candidate_gpu(8, 8), -1) << "more ranks on the node than GPUs";
  EXPECT_EQ(candidate_gpu(0, 0), -1) << "no GPU";
}

TEST(GpuAssignment, NcclNeedsADifferentKnownGpuOnEveryRank) {
  EXPECT_TRUE(every_rank_has_its_own_gpu({0x11, 0x22, 0x33}));
  EXPECT_TRUE(every_rank_has_its_own_gpu({0x11}));
  // Two processes on one physical GPU (both see it as device 0, or as different indices).
  EXPECT_FALSE(every_rank_has_its_own_gpu({0x11, 0x22, 0x11}));
  // One rank without a GPU of its own (or whose UUID CUDA could not give).
  EXPECT_FALSE(every_rank_has_its_own_gpu({0x11, 0, 0x33}));
}

}  // namespace
}  // namespace zero::comm
