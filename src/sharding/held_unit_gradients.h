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
                    std::span<const backend::ParamSegment> segments, DType param_dtype);

  // Takes unit u's micro-batch gradient: f32, contiguous, >= numel elements, element 0 the
  // unit's first (padding past numel must be zero). The first micro-batch's buffer is kept as
  // the unit's gradient (rounded in place); later ones are added rounded and may be dropped.
  void add(size_t u, const Tensor& micro_batch_grad);
  // Unit u's summed gradient, f32 [numel] (zeros if its backward has not run this window).
  Tensor unit(size_t u);
  // The gradient of flat elements [offset, offset + count), inside one unit.
  Tensor view(int64_t offset, int64_t count);
  // Per unit: its flat offset, its gradient and its parameters' segments relative to it - what
  // an optimizer update over the flat parameter buffer reads, unit by unit.
  std::vector<backend::UpdatePiece> pieces();
  // Frees every held gradient (after the step, or to drop a skipped one).
  void clear();

 private:
  size_t unit_at(int64_t offset) const;

  backend::Backend& backend_;
  const PartitionLayout& layout_;
  DType param_dtype_;
  std::vector<std::vector<backend::ParamSegment>> unit_segments_;  // relative to the unit
  std::vector<Tensor> held_;  // per unit: f32 [>= numel] or undefined
};

}  // namespace zero::sharding
