#include "tools/train_device.h"

#include "backend/backend_factory.h"
#if ZERO_HAVE_NCCL
#include "backend/cuda/nccl_comm.h"
#endif
#include "comm/host_staged_comm.h"
#include "comm/self_comm.h"
#include "comm/world.h"

namespace zero::tools {

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
    const int local_rank = comm::local_rank_from_environment();
    const bool own_gpu = local_rank < backend::cuda_device_count();
    // Every rank must agree: one rank without a GPU of its own sends everybody to host staging.
    use_nccl = world.all_reduce_scalar(own_gpu ? 0.0 : 1.0, comm::ReduceOp::kMax) == 0.0;
    if (use_nccl) name = "cuda:" + std::to_string(local_rank);
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
