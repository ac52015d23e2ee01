#include "engine/muon_matrices.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zero::engine {

std::vector<optim::MuonMatrix> muon_matrices(model::Model& model) {
  std::vector<optim::MuonMatrix> matrices;
  for (const auto& unit : model.units()) {
    if (unit->kind() != "transformer_block") continue;
    for (const model::Parameter& p : unit->parameters()) {
      if (p.spec.shape.size() != 2) continue;
      ZERO_CHECK(!p.spec.slice, "Muon over a tensor-parallel slice of " << p.spec.name);
      const int64_t rows = p.spec.shape[0], cols = p.spec.shape[1];
      // DeepSpeed sees the Hugging Face tensor: GPT-2's Conv1D weights are [in, out] there.
      const bool transposed = p.spec.hf_layout == model::HfLayout::kTransposed;
      const double hf_rows = static_cast<double>(transposed ? cols : rows);
      const double hf_cols = static_cast<double>(transposed ? rows : cols);
      matrices.push_back({p.flat_offset, rows, cols, std::sqrt(std::max(1.0, hf_rows / hf_cols))});
    }
  }
  return matrices;
}

}  // namespace zero::engine
