// HeldUnitGradients (sharding/held_unit_gradients.h): the first micro-batch's buffer becomes the
// unit's gradient rounded in place, later ones are added rounded - bit for bit what a zeroed
// f32 accumulator with Backend::add_rounded holds - and the pieces and views address the same
// elements as the flat layout, for an optimizer update and for norms of parameter ranges.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "engine/zero_harness.h"
#include "sharding/held_unit_gradients.h"

namespace zero::sharding {
namespace {
using engine::zero_test::small_model;

std::vector<float> values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(float));
  return out;
}

Tensor random_f32(backend::CpuBackend& cpu, int64_t n, uint32_t seed) {
  Tensor t = cpu.zeros({n}, DType::kF32, MemoryCategory::kWorkspace);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    // Values with more than bf16's 8 significant bits, so the rounding shows.
    t.data<float>()[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 3.0f;
  }
  return t;
}

struct Fixture {
  backend::CpuBackend cpu;
  std::unique_ptr<model::Model> net = small_model("llama", cpu);
  PartitionLayout layout{*net, 1, 0};
  std::vector<backend::ParamSegment> segments;
  Fixture() {
    for (model::Parameter* p : net->parameters()) {
      segments.push_back({p->flat_offset, p->numel(), p->spec.weight_decay});
    }
  }
};

TEST(HeldUnitGradients, SumsMicroBatchesAsARoundedAccumulatorDoes) {
  Fixture f;
  HeldUnitGradients held(f.cpu, f.layout, f.segments, DType::kBF16);
  const size_t u = 1;
  const int64_t numel = f.layout.unit(u).numel;
  const Tensor first = random_f32(f.cpu, f.layout.unit(u).padded_numel, 1);
  const Tensor second = random_f32(f.cpu, f.layout.unit(u).padded_numel, 2);
  // The reference: a zeroed f32 accumulator taking both, rounded.
  Tensor accumulator = f.cpu.zeros({numel}, DType::kF32, MemoryCategory::kWorkspace);
  f.cpu.add_rounded(accumulator, first.view(0, {numel}), DType::kBF16);
  f.cpu.add_rounded(accumulator, second.view(0, {numel}), DType::kBF16);

  Tensor buffer = f.cpu.empty({first.numel()}, DType::kF32, MemoryCategory::kWorkspace);
  f.cpu.copy(buffer, first);
  held.add(u, buffer);
  // The first micro-batch's buffer is kept (no copy), rounded in place.
  EXPECT_EQ(held.unit(u).raw_data(), buffer.raw_data());
  for (float v : values(held.unit(u))) ASSERT_EQ(round_to_bf16(v), v);
  held.add(u, second);
  EXPECT_EQ(values(held.unit(u)), values(accumulator));
}

TEST(HeldUnitGradients, PiecesAndViewsAddressTheFlatLayout) {
  Fixture f;
  HeldUnitGradients held(f.cpu, f.layout, f.segments, DType::kBF16);
  const size_t units = f.layout.units().size();
  for (size_t u = 0; u < units; ++u) {
    held.add(u, random_f32(f.cpu, f.layout.unit(u).padded_numel, static_cast<uint32_t>(10 + u)));
  }
  // Every segment appears once, in its unit's piece, at its flat offset.
  std::vector<backend::ParamSegment> rebuilt;
  for (const backend::UpdatePiece& piece : held.pieces()) {
    for (const backend::ParamSegment& s : piece.segments) {
      EXPECT_LE(s.offset + s.length, piece.grads.numel());
      rebuilt.push_back({piece.offset + s.offset, s.length, s.weight_decay});
    }
  }
  ASSERT_EQ(rebuilt.size(), f.segments.size());
  for (size_t i = 0; i < rebuilt.size(); ++i) {
    EXPECT_EQ(rebuilt[i].offset, f.segments[i].offset) << i;
    EXPECT_EQ(rebuilt[i].length, f.segments[i].length) << i;
    EXPECT_EQ(rebuilt[i].weight_decay, f.segments[i].weight_decay) << i;
  }
  // A parameter's view is its unit's slice.
  for (model::Parameter* p : f.net->parameters()) {
    const size_t u = f.net->unit_of(p);
    const Tensor whole = held.unit(u);
    const Tensor view = held.view(p->flat_offset, p->numel());
    EXPECT_EQ(view.raw_data(), static_cast<const float*>(whole.raw_data()) +
                                   (p->flat_offset - f.layout.unit(u).flat_begin))
        << p->spec.name;
  }
}

// Tracked, a unit's first add also takes its sum of squares: sum_squares's bits over the
// gradient it leaves, until a second add, unit() or view() (which hand the gradient out to be
// changed) or clear().
TEST(HeldUnitGradients, TrackedSumsOfSquaresAreThoseOfTheStoredGradients) {
  Fixture f;
  HeldUnitGradients held(f.cpu, f.layout, f.segments, DType::kBF16, /*track_squared_norms=*/true);
  const size_t units = f.layout.units().size();
  ASSERT_GE(units, 3u);
  for (size_t u = 0; u < units; ++u) {
    held.add(u, random_f32(f.cpu, f.layout.unit(u).padded_numel, static_cast<uint32_t>(20 + u)));
    ASSERT_TRUE(held.has_squared_norm(u)) << "unit " << u;
  }
  for (size_t u = 0; u < units; ++u) {
    const double tracked = held.squared_norm(u).data<double>()[0];
    const double expected = f.cpu.squared_norm(held.unit(u));
    EXPECT_GT(expected, 0.0);
    EXPECT_EQ(std::memcmp(&tracked, &expected, sizeof(double)), 0)
        << "unit " << u << ": " << tracked << " vs " << expected;
    EXPECT_FALSE(held.has_squared_norm(u)) << "unit() hands the gradient out";
  }
  held.clear();
  held.add(0, random_f32(f.cpu, f.layout.unit(0).padded_numel, 40));
  (void)held.view(f.layout.unit(0).flat_begin, 1);
  EXPECT_FALSE(held.has_squared_norm(0)) << "view() hands the gradient out";
  held.add(1, random_f32(f.cpu, f.layout.unit(1).padded_numel, 41));
  held.add(1, random_f32(f.cpu, f.layout.unit(1).padded_numel, 42));
  EXPECT_FALSE(held.has_squared_norm(1)) << "a second micro-batch";
  held.add(2, random_f32(f.cpu, f.layout.unit(2).padded_numel, 43));
  held.clear();
  EXPECT_FALSE(held.has_squared_norm(2));
  // Untracked, nothing is kept.
  HeldUnitGradients untracked(f.cpu, f.layout, f.segments, DType::kBF16);
  untracked.add(0, random_f32(f.cpu, f.layout.unit(0).padded_numel, 44));
  EXPECT_FALSE(untracked.has_squared_norm(0));
}

// Held in the parameters' dtype: the same values, sums and pieces as held in f32, in half the
// bytes; unit() and a second add widen the unit back to f32 first.
TEST(HeldUnitGradients, InTheParametersDtypeHoldsTheSameValuesInHalfTheBytes) {
  Fixture f;
  const size_t units = f.layout.units().size();
  const size_t before = f.cpu.allocator().stats().live(MemoryCategory::kGrads);
  HeldUnitGradients wide(f.cpu, f.layout, f.segments, DType::kBF16, true);
  HeldUnitGradients narrow(f.cpu, f.layout, f.segments, DType::kBF16, true,
                           /*hold_in_param_dtype=*/true);
  for (size_t u = 0; u < units; ++u) {
    const auto seed = static_cast<uint32_t>(60 + u);
    wide.add(u, random_f32(f.cpu, f.layout.unit(u).padded_numel, seed));
    const size_t held_before = f.cpu.allocator().stats().live(MemoryCategory::kGrads);
    narrow.add(u, random_f32(f.cpu, f.layout.unit(u).padded_numel, seed));
    // (The first add also makes the f64 slots of the units' sums of squares.)
    const size_t sums = u == 0 ? sizeof(double) * units : 0;
    EXPECT_EQ(f.cpu.allocator().stats().live(MemoryCategory::kGrads) - held_before,
              2 * static_cast<size_t>(f.layout.unit(u).numel) + sums)
        << "unit " << u << ": bf16, and the f32 buffer not kept";
    EXPECT_EQ(narrow.held_dtype(u), DType::kBF16);
    ASSERT_TRUE(narrow.has_squared_norm(u));
    const double a = wide.squared_norm(u).data<double>()[0];
    const double b = narrow.squared_norm(u).data<double>()[0];
    EXPECT_EQ(std::memcmp(&a, &b, sizeof(double)), 0) << "unit " << u << ": " << a << " vs " << b;
  }
  {
    const std::vector<backend::UpdatePiece> wide_pieces = wide.pieces();
    const std::vector<backend::UpdatePiece> narrow_pieces = narrow.pieces();
    ASSERT_EQ(wide_pieces.size(), narrow_pieces.size());
    for (size_t i = 0; i < wide_pieces.size(); ++i) {
      EXPECT_EQ(narrow_pieces[i].offset, wide_pieces[i].offset);
      EXPECT_EQ(narrow_pieces[i].grads.dtype(), DType::kBF16);
      Tensor widened =
          f.cpu.empty({narrow_pieces[i].grads.numel()}, DType::kF32, MemoryCategory::kOther);
      f.cpu.copy(widened, narrow_pieces[i].grads);
      EXPECT_EQ(values(widened), values(wide_pieces[i].grads)) << "piece " << i;
    }
    // A view stays in bf16 (and hands the gradient out); unit() widens to f32, the same values.
    const Tensor view = narrow.view(f.layout.unit(1).flat_begin, 5);
    EXPECT_EQ(view.dtype(), DType::kBF16);
    EXPECT_FALSE(narrow.has_squared_norm(1));
    const Tensor unit0 = narrow.unit(0);
    EXPECT_EQ(unit0.dtype(), DType::kF32);
    EXPECT_EQ(narrow.held_dtype(0), DType::kF32);
    EXPECT_EQ(values(unit0), values(wide.unit(0)));
    // A second micro-batch widens first, then adds rounded as the f32 holder does.
    const Tensor extra = random_f32(f.cpu, f.layout.unit(2).padded_numel, 70);
    wide.add(2, extra);
    narrow.add(2, extra);
    EXPECT_EQ(narrow.held_dtype(2), DType::kF32);
    EXPECT_EQ(values(narrow.unit(2)), values(wide.unit(2)));
  }  // the pieces and views let go of the gradients
  wide.clear();
  narrow.clear();
  EXPECT_EQ(f.cpu.allocator().stats().live(MemoryCategory::kGrads), before);
}

TEST(HeldUnitGradients, HoldsGradientBytesOnlyUntilCleared) {
  Fixture f;
  const size_t before = f.cpu.allocator().stats().live(MemoryCategory::kGrads);
  HeldUnitGradients held(f.cpu, f.layout, f.segments, DType::kBF16);
  EXPECT_EQ(f.cpu.allocator().stats().live(MemoryCategory::kGrads), before);
  // A unit whose backward never ran reads as zeros (allocated as gradients).
  for (float v : values(held.unit(0))) EXPECT_EQ(v, 0.0f);
  EXPECT_GT(f.cpu.allocator().stats().live(MemoryCategory::kGrads), before);
  held.clear();
  EXPECT_EQ(f.cpu.allocator().stats().live(MemoryCategory::kGrads), before);
}

}  // namespace
}  // namespace zero::sharding
