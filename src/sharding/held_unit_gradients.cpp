#include "sharding/held_unit_gradients.h"

#include <algorithm>

#include "core/check.h"

namespace zero::sharding {

HeldUnitGradients::HeldUnitGradients(backend::Backend& backend, const PartitionLayout& layout,
                                     std::span<const backend::ParamSegment> segments,
                                     DType param_dtype, bool track_squared_norms,
                                     bool hold_in_param_dtype)
    : backend_(backend), layout_(layout), param_dtype_(param_dtype),
      track_squared_norms_(track_squared_norms),
      hold_in_param_dtype_(hold_in_param_dtype && param_dtype != DType::kF32) {
  ZERO_CHECK(!hold_in_param_dtype || track_squared_norms,
             "holding gradients in the parameters' dtype needs one micro-batch on one rank "
             "(track_squared_norms)");
  const size_t units = layout_.units().size();
  held_.resize(units);
  squared_norm_current_.assign(units, false);
  unit_segments_.resize(units);
  for (const backend::ParamSegment& s : segments) {
    if (s.length == 0) continue;
    const size_t u = unit_at(s.offset);
    const UnitPartition& part = layout_.unit(u);
    ZERO_CHECK(s.offset + s.length <= part.flat_begin + part.numel,
               "a parameter straddles units " << u << " and " << u + 1 << " at element " << s.offset);
    unit_segments_[u].push_back({s.offset - part.flat_begin, s.length, s.weight_decay});
  }
}

size_t HeldUnitGradients::unit_at(int64_t offset) const {
  const std::vector<UnitPartition>& units = layout_.units();
  // The last unit starting at or before `offset` (units are in flat order).
  auto after = std::upper_bound(units.begin(), units.end(), offset,
                                [](int64_t at, const UnitPartition& u) { return at < u.flat_begin; });
  ZERO_CHECK(after != units.begin(), "flat element " << offset << " precedes every unit");
  const size_t u = static_cast<size_t>(after - units.begin()) - 1;
  ZERO_CHECK(offset < units[u].flat_begin + units[u].numel || units[u].numel == 0,
             "flat element " << offset << " lies in no unit");
  return u;
}

void HeldUnitGradients::add(size_t u, const Tensor& micro_batch_grad) {
  const int64_t numel = layout_.unit(u).numel;
  ZERO_CHECK(micro_batch_grad.dtype() == DType::kF32 && micro_batch_grad.numel() >= numel,
             "unit " << u << "'s gradient: " << micro_batch_grad.describe());
  Tensor real = micro_batch_grad.view(0, {numel});
  if (!held_[u].defined()) {
    // 0 + rounded: the accumulator's first add.
    if (track_squared_norms_) {
      // Like the gradients, the sums exist from the first backward to clear().
      if (!squared_norms_.defined()) {
        squared_norms_ = backend_.empty({static_cast<int64_t>(held_.size())}, DType::kF64,
                                        MemoryCategory::kGrads);
      }
      Tensor slot = squared_norm(u);
      if (hold_in_param_dtype_) {
        // The f32 buffer goes back to the allocator when the caller lets it go.
        Tensor stored = backend_.empty({numel}, param_dtype_, MemoryCategory::kGrads);
        backend_.copy_sum_squares(stored, real, slot);
        squared_norm_current_[u] = true;
        held_[u] = stored;
        return;
      }
      backend_.round_in_place_sum_squares(real, param_dtype_, slot);
      squared_norm_current_[u] = true;
    } else {
      backend_.round_in_place(real, param_dtype_);
    }
    held_[u] = micro_batch_grad;
    return;
  }
  // A later micro-batch (tracking expects one a window: its sum would not hold for long).
  squared_norm_current_[u] = false;
  widen(u);
  Tensor sum = held_[u].view(0, {numel});
  backend_.add_rounded(sum, real, param_dtype_);
}

Tensor HeldUnitGradients::squared_norm(size_t u) {
  ZERO_CHECK(squared_norms_.defined(), "squared_norm(" << u << "): no sums are tracked");
  return squared_norms_.view(static_cast<int64_t>(u), {1});
}

Tensor HeldUnitGradients::unit(size_t u) {
  squared_norm_current_[u] = false;
  const int64_t numel = layout_.unit(u).numel;
  if (!held_[u].defined()) held_[u] = backend_.zeros({numel}, DType::kF32, MemoryCategory::kGrads);
  widen(u);
  return held_[u].view(0, {numel});
}

Tensor HeldUnitGradients::held(size_t u) {
  const int64_t numel = layout_.unit(u).numel;
  if (!held_[u].defined()) {
    held_[u] = backend_.zeros({numel}, hold_in_param_dtype_ ? param_dtype_ : DType::kF32,
                              MemoryCategory::kGrads);
  }
  return held_[u].view(0, {numel});
}

DType HeldUnitGradients::held_dtype(size_t u) const {
  if (held_[u].defined()) return held_[u].dtype();
  return hold_in_param_dtype_ ? param_dtype_ : DType::kF32;
}

void HeldUnitGradients::widen(size_t u) {
  if (!held_[u].defined() || held_[u].dtype() == DType::kF32) return;
  Tensor wide = backend_.empty({held_[u].numel()}, DType::kF32, MemoryCategory::kGrads);
  backend_.copy(wide, held_[u]);
  held_[u] = wide;
}

Tensor HeldUnitGradients::view(int64_t offset, int64_t count) {
  const size_t u = unit_at(offset);
  const UnitPartition& part = layout_.unit(u);
  ZERO_CHECK(offset + count <= part.flat_begin + part.numel,
             "gradient elements [" << offset << ", " << offset + count << ") leave unit " << u);
  squared_norm_current_[u] = false;
  return held(u).view(offset - part.flat_begin, {count});
}

std::vector<backend::UpdatePiece> HeldUnitGradients::pieces() {
  std::vector<backend::UpdatePiece> out;
  for (size_t u = 0; u < held_.size(); ++u) {
    if (unit_segments_[u].empty()) continue;
    out.push_back({layout_.unit(u).flat_begin, held(u), unit_segments_[u]});
  }
  return out;
}

void HeldUnitGradients::clear() {
  for (Tensor& t : held_) t = Tensor();
  squared_norms_ = Tensor();
  squared_norm_current_.assign(squared_norm_current_.size(), false);
}

}  // namespace zero::sharding
