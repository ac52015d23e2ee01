#include "tools/train_device.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend_factory.h"
#include "comm/gpu_assignment.h"
#if ZERO_HAVE_NCCL
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_comm.h"
#endif
#include "comm/host_staged_comm.h"
#include "comm/self_comm.h"
#include "comm/world.h"

namespace zero::tools {
#if ZERO_HAVE_NCCL
namespace {

// Every rank's `value`, in rank order (a collective over `world`).
std::vector<uint64_t> gather_u64(comm::Comm& world, uint64_t value) {
  Tensor mine = Tensor::zeros_host({1}, DType::kI64, MemoryCategory::kComm);
  Tensor all = Tensor::zeros_host({world.world_size()}, DType::kI64, MemoryCategory::kComm);
  std::memcpy(mine.raw_data(), &value, sizeof(value));
  world.all_gather(mine, all);
  std::vector<uint64_t> out(static_cast<size_t>(world.world_size()));
  std::memcpy(out.data(), all.raw_data(), out.size() * sizeof(uint64_t));
  return out;
}

}  // namespace
#endif

TrainDevice open_train_device(const std::string& device_name, comm::Comm& world,
                              bool profile_kernels) {
  std::string name = device_name;
  if (name == "auto") {
    // Every rank must agree: one rank without a GPU keeps the whole job on the CPU.
    const double without = backend::cuda_visible() ? 0.0 : 1.0;
    const bool all_see_one =
        (world.world_size() > 1 ? world.all_reduce_scalar(without, comm::ReduceOp::kMax) : without) == 0.0;
    name = all_see_one ? "cuda" : "cpu";
  }
  [[maybe_unused]] bool use_nccl = false;
#if ZERO_HAVE_NCCL
  if (name == "cuda" && world.world_size() > 1) {
    // The GPU this rank would own: its local rank's, or the only one it sees (a launcher that
    // gives each rank its own CUDA_VISIBLE_DEVICES, as Slurm's --gpus-per-task). NCCL needs a
    // different physical GPU per rank, so the GPUs' UUIDs decide, not device counts; every rank
    // sees the same list, so all agree, and one rank without a GPU of its own sends everybody to
    // host staging.
    const int candidate =
        comm::candidate_gpu(comm::local_rank_from_environment(), backend::cuda_device_count());
    const uint64_t gpu = candidate >= 0 ? backend::cuda_device_uuid_hash(candidate) : 0;
    use_nccl = comm::every_rank_has_its_own_gpu(gather_u64(world, gpu));
    if (use_nccl) name = "cuda:" + std::to_string(candidate);
  }
#endif
  TrainDevice out;
  out.backend = backend::create_backend(name);
#if ZERO_HAVE_NCCL
  if (use_nccl) {
    out.device_group =
        std::make_unique<comm::NcclComm>(world, dynamic_cast<backend::CudaBackend&>(*out.backend));
  }
#endif
  if (profile_kernels) {
    // NcclComm (above) keeps the CUDA backend itself; everything else sees the wrapper.
    auto profiler = std::make_unique<backend::ProfilingBackend>(std::move(out.backend));
    out.profiler = profiler.get();
    out.backend = std::move(profiler);
  }
  if (!out.device_group && !out.backend->device().is_cpu()) {
    // At world size 1 the group's copies are the device backend's.
    if (world.world_size() > 1) {
      out.device_group = std::make_unique<comm::HostStagedComm>(world, *out.backend);
    } else {
      out.device_group = std::make_unique<comm::SelfComm>(out.backend.get());
    }
  }
  out.group = out.device_group ? out.device_group.get() : &world;
  out.device_per_rank = use_nccl || world.world_size() == 1;
  out.resolved = name;
  return out;
}

}  // namespace zero::tools
