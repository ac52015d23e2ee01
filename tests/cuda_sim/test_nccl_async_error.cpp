// NcclComm when a peer rank dies mid-collective: the collective never finishes and NCCL reports
// the loss only through ncclCommGetAsyncError. The next host wait of the CUDA backend (here the
// step's loss read) must end with an error naming what happened - not wait forever - and abort
// the communicator. The simulator's NCCL fakes the loss (cuda_sim/nccl_faults.h) and its streams
// turn a wait that could never end into a HungWait, which is what this test fails with when the
// check is missing.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_comm.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "cuda_sim/nccl_faults.h"

namespace zero::comm {
namespace {

TEST(NcclAsyncError, AHostWaitBehindAHungCollectiveThrowsInsteadOfHanging) {
  backend::CudaBackend gpu(0);
  SelfComm host;
  {
    NcclComm nccl(host, gpu);
    Tensor x = gpu.zeros({64}, DType::kF32, MemoryCategory::kOther);
    ::cuda_sim::nccl_fail_next_collective();
    nccl.all_reduce(x, ReduceOp::kSum);  // the compute stream now waits for it
    Tensor total = gpu.empty({1}, DType::kF64, MemoryCategory::kOther);
    gpu.sum(total, x, 1.0, false);
    try {
      gpu.read_scalar(total);
      FAIL() << "the loss read returned";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("NCCL reported a failure"), std::string::npos) << message;
      EXPECT_NE(message.find("another rank failed"), std::string::npos) << message;
      EXPECT_NE(message.find("rank 0 of 1"), std::string::npos) << message;
    }
    // Aborted: a later collective is refused with a clear error, not issued.
    EXPECT_THROW(nccl.all_reduce(x, ReduceOp::kSum), Error);
  }
  // The backend's waits no longer consult the destroyed communicator.
  Tensor y = gpu.zeros({4}, DType::kF32, MemoryCategory::kOther);
  Tensor total = gpu.empty({1}, DType::kF64, MemoryCategory::kOther);
  gpu.sum(total, y, 1.0, false);
  EXPECT_EQ(gpu.read_scalar(total), 0.0);
}

}  // namespace
}  // namespace zero::comm
