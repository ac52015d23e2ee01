// DeepSpeed's partial optimizer offload (zero_optimization.offload_optimizer.ratio < 1, ZeRO
// stage 3): the first whole units of the partition (sharding::ZeroStage::device_update_numel())
// update on the device with their optimizer state there, the rest on the host through the CPU
// step, in the same step with the same hyper-parameters, so the result is bit-identical to
// offloading everything (and to offloading nothing).
//
// The optimizer's host state stays full-length, so checkpoints see one partition: the device
// part is mirrored into it before it is read (download_state) and taken from it after a load
// (upload_state).
//
// Thread/stream rules: the thread that drives the Engine; device work in stream order.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "optim/optimizer.h"
#include "sharding/zero_stage.h"

namespace zero::engine {

class PartialOffload {
 public:
  // The device part's state: one zeroed f32 buffer per state of `optimizer`.
  PartialOffload(sharding::ZeroStage& zero, const optim::Optimizer& optimizer, backend::Backend& device);

  // The device part of a step: clip (coefficient < 1) and update with `hyper` (the optimizer's
  // next_hyper: the same step number and learning rate as the host part).
  void step(const optim::Optimizer& optimizer, const backend::OptimizerHyper& hyper, double clip_coefficient);
  // Copies the device part's state into elements [0, split) of the host state tensors
  // (Optimizer::state_tensors(), in its order).
  void download_state(const std::vector<std::pair<std::string, Tensor>>& host_state);
  // The other way, after a checkpoint was loaded into the host state.
  void upload_state(const std::vector<std::pair<std::string, Tensor>>& host_state);

 private:
  sharding::ZeroStage& zero_;
  backend::Backend& device_;
  std::vector<Tensor> state_;
};

}  // namespace zero::engine
