// Which parameters Muon orthogonalizes - the hidden 2-D weights, as DeepSpeed tags them
// (use_muon: a 2-D parameter of a hidden layer), that is every matrix of the transformer blocks -
// and how this rank holds them. The embeddings, the LM head, norms and biases take Muon's
// auxiliary AdamW.
#pragma once
#include <vector>

#include "model/model.h"
#include "optim/muon.h"
#include "sharding/partition_layout.h"

namespace zero::engine {

// The model's Muon matrices unit by unit, offsets counted from each unit's first element, each
// with the update scale DeepSpeed gives its Hugging Face shape; the units hold them whole (the
// update buffers are the model's flat ones). The model must hold whole tensors (no
// tensor-parallel slices).
std::vector<optim::MuonUnit> muon_units(model::Model& model);

// The same units as ZeRO stages 1-3 hold them on this rank: its shard of each unit, at the
// shard's place in the partition buffers, gathered over the layout's ranks.
std::vector<optim::MuonUnit> muon_units(model::Model& model,
                                        const sharding::PartitionLayout& layout);

}  // namespace zero::engine
