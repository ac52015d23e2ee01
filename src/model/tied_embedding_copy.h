// TiedEmbeddingCopy: the last pipeline stage's own copy of the token embedding, for a model with
// tied embeddings whose embedding unit lives on the first stage (DeepSpeed's TiedLayerSpec). It
// declares a parameter with the embedding's name and shape, computes nothing (forward and
// backward pass their argument through unchanged), and the stage's LmHeadUnit reads and
// accumulates into it. The pipeline engine all-reduces its gradient with the first stage's
// (ReduceTiedGrads), so both copies receive the same updates and stay equal.
#pragma once
#include "model/unit.h"

namespace zero::model {

class TiedEmbeddingCopy final : public Unit {
 public:
  // `embedding`: the token embedding's spec (name, shape, weight decay) in the full model.
  explicit TiedEmbeddingCopy(const ParamSpec& embedding);

  std::string kind() const override { return "tied_embedding_copy"; }
  Tensor forward(StepContext&, const Tensor& x) override { return x; }
  Tensor backward(StepContext&, const Tensor& dy) override { return dy; }
  void release_activations() override {}
  bool recomputable() const override { return true; }

  Parameter& weight() { return parameters()[0]; }
};

}  // namespace zero::model
