#include "engine/tensor_parallel_norm.h"

#include "core/error.h"
#include "sharding/partition_layout.h"

namespace zero::engine {

double tensor_parallel_norm_weight(const model::ParamSpec& spec, int64_t tp) {
  if (spec.slice) return 1.0 / static_cast<double>(spec.slice->replicas);
  return 1.0 / static_cast<double>(tp);
}

void reduce_tensor_parallel_squared_norm(sharding::ZeroStage& zero, model::Model& model,
                                         comm::Comm& data_group, comm::Comm& tensor_group,
                                         Tensor& squared_norm) {
  const int64_t tp = tensor_group.world_size();
  if (tp == 1) return;
  backend::Backend& host = zero.optimizer_backend();
  // The duplicated share of this rank's squared norm, over what this rank holds of the reduced
  // gradients (all of them at stage 0, its partition at stages 1-2).
  double duplicated = 0.0;
  auto add = [&](const model::Parameter& p, int64_t offset, int64_t count) {
    const double w = tensor_parallel_norm_weight(p.spec, tp);
    if (w == 1.0 || count == 0) return;
    duplicated += (1.0 - w) * host.squared_norm(zero.reduced_gradient(offset, count));
  };
  if (zero.stage() == 0) {
    for (model::Parameter* p : model.parameters()) add(*p, p->flat_offset, p->numel());
  } else {
    for (const sharding::ParamSlice& s : zero.layout().slices()) {
      add(*s.param, s.partition_offset, s.count);
    }
    duplicated = data_group.all_reduce_scalar(duplicated, comm::ReduceOp::kSum);
  }
  backend::Backend& be = model.backend();
  Tensor correction = be.empty({1}, DType::kF64, MemoryCategory::kWorkspace);
  be.fill(correction, duplicated);
  be.add(squared_norm, correction, -1.0);
  tensor_group.all_reduce(squared_norm, comm::ReduceOp::kSum);
}

}  // namespace zero::engine
