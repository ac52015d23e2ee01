// Which parameters Muon orthogonalizes: the hidden 2-D weights, as DeepSpeed tags them
// (use_muon: a 2-D parameter of a hidden layer) - every matrix of the transformer blocks. The
// embeddings, the LM head, norms and biases take Muon's auxiliary AdamW.
#pragma once
#include <vector>

#include "model/model.h"
#include "optim/muon.h"

namespace zero::engine {

// The model's Muon matrices, at their offsets in the flat parameter buffer, each with the
// update scale DeepSpeed gives its Hugging Face shape. The model must hold whole tensors (no
// tensor-parallel slices).
std::vector<optim::MuonMatrix> muon_matrices(model::Model& model);

}  // namespace zero::engine
