// HeldUnitGradients: the summed micro-batch gradients of ZeRO stages 0-1 in 16-bit training,
// kept unit by unit instead of in one flat accumulator.
//
// Why: a flat f32 accumulator (4 bytes per parameter) lives for the whole run, so it sits next
// to the activations at the start of backward - where the memory peak is. Held per unit, a
// unit's gradient exists only from its first backward until zero_grad() after the optimizer
// step; at the peak only the last unit's gradient does (the memory PyTorch's set_to_none
// gradients take). It also saves the accumulator's fill and, for the first micro-batch, the
// add: the unit's own backward buffer becomes the held gradient, rounded in place.
//
// Numerics are the flat accumulator's: micro-batch 1 stores its gradient rounded to the
// parameters' dtype (0 + r = r; only the sign of a zero can differ), later micro-batches add
// theirs rounded (Backend::add_rounded), so every element sees the same operations.
//
// With track_squared_norms (stage 0 on one rank with one micro-batch a step, where the stored
// gradients are the reduced ones), a unit's first add also takes its sum of squares in the same
// pass (Backend::round_in_place_sum_squares): the step's norm then reads those sums instead of
// every gradient again (on the Llama-1B shape, 3.8 GB a step).
//
// With hold_in_param_dtype as well (nothing will add to or scale the stored gradients, and the
// optimizer runs on this backend), a unit's first add stores its gradient in the parameters'
// 16-bit dtype (Backend::copy_sum_squares) and lets the f32 micro-batch buffer go: the values are
// the rounded ones either way, so nothing changes but the bytes - half the held gradients'
// memory, a 2-byte write instead of 4 in the rounding pass and a 2-byte read instead of 4 in the
// update (which takes 16-bit gradients, widened exactly). Whatever would change a stored 16-bit
// gradient (another add, unit()) first widens it back to f32, with the same values.
//
// Coordinates are the model's flat ones: unit u covers [flat_begin, flat_begin + numel) of
// PartitionLayout::unit(u); a parameter never straddles two units.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "sharding/partition_layout.h"

namespace zero::sharding {

class HeldUnitGradients {
 public:
  // `segments` are the model's parameters in flat coordinates (the stage-0 update's segments).
  // References must outlive this.
  HeldUnitGradients(backend::Backend& backend, const PartitionLayout& layout,
                    std::span<const backend::ParamSegment> segments, DType param_dtype,
                    bool track_squared_norms = false, bool hold_in_param_dtype = false);

  // Takes unit u's micro-batch gradient: f32, contiguous, >= numel elements, element 0 the
  // unit's first (padding past numel must be zero). The first micro-batch's buffer is kept as
  // the unit's gradient (rounded in place); later ones are added rounded and may be dropped.
  void add(size_t u, const Tensor& micro_batch_grad);
  // Unit u's summed gradient, f32 [numel] (zeros if its backward has not run this window; a
  // gradient held in 16 bits is widened first). The caller may change it: its tracked sum of
  // squares no longer counts.
  Tensor unit(size_t u);
  // The gradient of flat elements [offset, offset + count), inside one unit, in its held dtype
  // (f32, or the parameters' with hold_in_param_dtype); as with unit(), the unit's tracked sum
  // of squares no longer counts.
  Tensor view(int64_t offset, int64_t count);
  // The dtype unit u's gradient is held in now (f32 unless stored in the parameters' dtype).
  DType held_dtype(size_t u) const;
  // With track_squared_norms: whether unit u's sum of squares, taken by its first add, still
  // describes its gradient (no other add, and neither unit() nor view() gave it out since), and
  // that sum: f64 [1] on the backend, sum_squares's bits.
  bool has_squared_norm(size_t u) const { return squared_norm_current_[u]; }
  Tensor squared_norm(size_t u);
  // Per unit: its flat offset, its gradient (in its held dtype) and its parameters' segments
  // relative to it - what an optimizer update over the flat parameter buffer reads, unit by unit.
  std::vector<backend::UpdatePiece> pieces();
  // Frees every held gradient (after the step, or to drop a skipped one).
  void clear();

 private:
  size_t unit_at(int64_t offset) const;
  // Unit u's gradient as held (zeros of the held dtype if none), [numel].
  Tensor held(size_t u);
  // Replaces a 16-bit held gradient of unit u by its f32 widening (same values).
  void widen(size_t u);

  backend::Backend& backend_;
  const PartitionLayout& layout_;
  DType param_dtype_;
  std::vector<std::vector<backend::ParamSegment>> unit_segments_;  // relative to the unit
  std::vector<Tensor> held_;  // per unit: f32 [>= numel], param dtype [numel], or undefined
  bool track_squared_norms_;
  bool hold_in_param_dtype_;
  Tensor squared_norms_;      // f64 [units] while tracked sums exist: slot u is unit u's sum
  std::vector<bool> squared_norm_current_;  // per unit: slot u describes held_[u]
};

}  // namespace zero::sharding
