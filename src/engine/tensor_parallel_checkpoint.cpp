#include "engine/tensor_parallel_checkpoint.h"

#include <cstring>

#include "comm/comm.h"
#include "engine/checkpoint_tensors.h"
#include "model/tensor_slice_gather.h"

namespace zero::engine {

ManifestEntry logical_manifest_entry(const model::Parameter& p) {
  const Shape& shape = p.spec.slice ? p.spec.slice->full_shape : p.spec.shape;
  return {p.spec.name, shape, shape_numel(shape)};
}

std::pair<int, int> tensor_rank_and_size(const model::Model& model) {
  const comm::Comm* group = model.tensor_group();
  if (group == nullptr) return {0, 1};
  return {group->rank(), group->world_size()};
}

void append_logical_pieces(const model::ParamSpec& spec, int tp_rank, int64_t offset,
                           const Tensor& host, const std::string& state,
                           std::vector<std::pair<std::string, Tensor>>& pieces) {
  if (!model::writes_tensor_part(spec, tp_rank)) return;
  if (!spec.slice) {
    pieces.emplace_back(shard_piece_key(spec.name, offset, state), host);
    return;
  }
  const float* values = host.data<float>();
  for (const model::SliceRun& run : model::slice_runs(spec.slice, offset, host.numel())) {
    Tensor piece = Tensor::empty(cpu_allocator(), {run.length}, DType::kF32, MemoryCategory::kOther);
    std::memcpy(piece.raw_data(), values + (run.local - offset),
                static_cast<size_t>(run.length) * sizeof(float));
    pieces.emplace_back(shard_piece_key(spec.name, run.logical, state), std::move(piece));
  }
}

void read_local_elements(const CheckpointTensors& tensors, const model::ParamSpec& spec,
                         const std::string& state, int64_t offset, int64_t count, float* dst) {
  for (const model::SliceRun& run : model::slice_runs(spec.slice, offset, count)) {
    tensors.read(spec.name, state, run.logical, run.length, dst + (run.local - offset));
  }
}

Tensor whole_logical_tensor(model::Model& model, const model::Parameter& p, const Tensor& host) {
  return model::gather_logical_tensor(model.backend(), model.tensor_group(), p.spec, host);
}

}  // namespace zero::engine
