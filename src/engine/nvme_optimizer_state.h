// NvmeOptimizerState: the optimizer's state on an NVMe drive (ZeRO-Infinity,
// zero_optimization.offload_optimizer.device "nvme"). The state buffers of this rank's partition
// ("exp_avg", "exp_avg_sq", ...) live in files under nvme_path (offload/nvme_swap_store.h); the
// optimizer step sweeps them sub-group by sub-group (zero_optimization.sub_group_size), reading
// the next sub-group and writing the previous one while the current one is updated when
// pipeline_read / pipeline_write ask for it, so only the staging buffers are ever in host memory.
// The f32 master weights stay in (pinned) host memory next to the gradient partition, as with
// offload to "cpu": they are a third of Adam's bytes, and keeping them lets the upload of the
// updated parameters and checkpoints work unchanged. The update is offload/cpu_optimizer.h's on
// each sub-group, with each parameter segment cut at the sub-group's bounds (elementwise
// optimizers only: Lamb's trust ratio needs whole segments, and Lamb is refused at ZeRO stages
// >= 1 anyway), so the result is bit-identical to offload to "cpu".
//
// Thread rules: the engine's thread only. Ownership: owns the store (its files are removed when
// this is destroyed).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/optimizer_kernels.h"
#include "config/aio_config.h"
#include "config/offload_config.h"
#include "core/allocator.h"
#include "core/tensor.h"
#include "offload/cpu_optimizer.h"
#include "offload/nvme_swap_store.h"

namespace zero::engine {

class NvmeOptimizerState {
 public:
  // Validates the aio and offload settings (use_gds, nvme_path, buffer_count vs pipelining) and
  // creates the zero-filled state files for `numel` partition elements. `staging` is the
  // backend's pinned host allocator.
  NvmeOptimizerState(const config::AioConfig& aio, const config::OffloadOptimizerConfig& offload,
                     int64_t sub_group_size, int rank, std::vector<std::string> state_names,
                     int64_t numel, Allocator& staging);

  // One optimizer update of the partition (the arguments of CpuOptimizerStep::step, the state
  // coming from the files): master, grads and param_copy (undefined: none) are whole-partition
  // host tensors.
  void step(offload::CpuOptimizerStep& cpu_step, const Tensor& master, const Tensor& grads,
            const Tensor& param_copy, std::span<const backend::ParamSegment> segments,
            const backend::OptimizerHyper& hyper, double clip_coefficient);

  // Whole state tensors in host memory, named as Optimizer::state_tensors() names them (for
  // checkpoints: the one time the whole state is in memory at once).
  std::vector<std::pair<std::string, Tensor>> read_all();
  // Replaces the files' contents with `state` (as read_all() returns it, after a checkpoint load).
  void write_all(const std::vector<std::pair<std::string, Tensor>>& state);

  const offload::NvmeSwapStore& store() const { return *store_; }

 private:
  std::vector<std::string> names_;
  int64_t numel_;
  std::unique_ptr<offload::NvmeSwapStore> store_;
};

}  // namespace zero::engine
