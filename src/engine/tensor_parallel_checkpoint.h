// The tensor-parallel side of Engine checkpoints (engine_checkpoint.cpp). A tensor-parallel run
// writes the same format as any other: tensors by logical (Hugging Face) parameter name, logical
// shape and logical element offsets, so a checkpoint saved at (tp, dp) loads at any other
// (tp, dp) — tp = 1 included — and `zero convert` reads it unchanged.
//   Manifest: logical names and the logical (full) shapes (TensorSlice::full_shape).
//   ZeRO stage 0: the data rank 0 ranks of the tensor group gather each tensor (master weights
//     and optimizer states, model/tensor_slice_gather.h) and the global rank 0 writes whole
//     tensors into model.safetensors / optimizer.safetensors, as without tensor parallelism.
//   ZeRO stages 1-3: every (data rank d, tensor rank t) writes zero_shard_<d*tp+t>_of_<dp*tp>;
//     its ZeRO pieces are cut into logical runs (one per block of a column-parallel or vocabulary
//     part, one per row of a row-parallel part) keyed "<param>@<logical offset>[.<state>]".
//     Replicated parameters are written by tensor rank 0 only, replicated key/value parts by the
//     first of their replicas (the others hold identical values). engine_state.json's world_size
//     is dp * tp (the number of shard files).
// Loading maps each local element range back to its logical runs and reads those, whatever
// layout wrote them.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "engine/engine_state.h"
#include "model/model.h"

namespace zero::engine {

class CheckpointTensors;

// The manifest entry of a parameter: its logical name and shape (the full tensor's for a
// tensor-parallel part).
ManifestEntry logical_manifest_entry(const model::Parameter& p);

// This rank's place in `model`'s tensor group: {rank, size}; {0, 1} without one.
std::pair<int, int> tensor_rank_and_size(const model::Model& model);

// Appends the pieces of local elements [offset, offset + host.numel()) of `spec` (values in
// `host`, f32) under their logical keys (shard_piece_key with logical offsets) — nothing when
// tensor rank `tp_rank` is not the one that writes this part (model::writes_tensor_part).
void append_logical_pieces(const model::ParamSpec& spec, int tp_rank, int64_t offset,
                           const Tensor& host, const std::string& state,
                           std::vector<std::pair<std::string, Tensor>>& pieces);

// Reads local elements [offset, offset + count) of `spec` (state empty: the master values) from
// the logical tensors of a checkpoint into `dst` (f32); identical to tensors.read for a
// parameter without a slice.
void read_local_elements(const CheckpointTensors& tensors, const model::ParamSpec& spec,
                         const std::string& state, int64_t offset, int64_t count, float* dst);

// Collective over `model`'s tensor group: the whole logical tensor of `p` from this rank's part
// `host` (f32, p's local shape); `host` itself without a slice.
Tensor whole_logical_tensor(model::Model& model, const model::Parameter& p, const Tensor& host);

}  // namespace zero::engine
