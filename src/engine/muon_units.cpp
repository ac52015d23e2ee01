#include "engine/muon_units.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zero::engine {

std::vector<optim::MuonUnit> muon_units(model::Model& model) {
  std::vector<optim::MuonUnit> units;
  for (const auto& unit : model.units()) {
    if (unit->kind() != "transformer_block") continue;
    optim::MuonUnit held;
    held.update_offset = unit->flat_begin();
    held.local_count = unit->flat_numel();
    for (const model::Parameter& p : unit->parameters()) {
      if (p.spec.shape.size() != 2) continue;
      ZERO_CHECK(!p.spec.slice, "Muon over a tensor-parallel slice of " << p.spec.name);
      const int64_t rows = p.spec.shape[0], cols = p.spec.shape[1];
      // DeepSpeed sees the Hugging Face tensor: GPT-2's Conv1D weights are [in, out] there.
      const bool transposed = p.spec.hf_layout == model::HfLayout::kTransposed;
      const double hf_rows = static_cast<double>(transposed ? cols : rows);
      const double hf_cols = static_cast<double>(transposed ? rows : cols);
      held.matrices.push_back({p.flat_offset - unit->flat_begin(), rows, cols,
                               std::sqrt(std::max(1.0, hf_rows / hf_cols))});
    }
    if (!held.matrices.empty()) units.push_back(std::move(held));
  }
  return units;
}

std::vector<optim::MuonUnit> muon_units(model::Model& model,
                                        const sharding::PartitionLayout& layout) {
  std::vector<optim::MuonUnit> units = muon_units(model);
  const int rank = layout.rank();
  for (optim::MuonUnit& held : units) {
    const auto part = std::find_if(
        layout.units().begin(), layout.units().end(),
        [&](const sharding::UnitPartition& u) { return u.flat_begin == held.update_offset; });
    ZERO_CHECK(part != layout.units().end(), "no partition for the unit at " << held.update_offset);
    held.update_offset = part->partition_offset;
    held.local_begin = part->owned_begin(rank);
    held.local_count = part->owned_count(rank);
    held.gather_numel = layout.world_size() > 1 ? part->shard_numel : 0;
  }
  return units;
}

}  // namespace zero::engine
