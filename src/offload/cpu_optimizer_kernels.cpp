// The SIMD bodies of the CPU optimizer step, compiled once per Highway target (foreach_target.h
// re-includes this file for SSSE3, SSE4, AVX2, AVX-512 (AVX3), AVX-512 with VNNI/VBMI2 (AVX3_DL)
// and the scalar fallback: HWY_COMPILE_ALL_ATTAINABLE, set in src/CMakeLists.txt) and chosen at
// run time by HWY_DYNAMIC_DISPATCH.
//
// Why every target gives the same bits as Backend::optimizer_update's sequence:
//  * each kernel spells out the f32 operations of backend/cpu/cpu_optimizers.cpp in the same
//    order (Mul then Add, never MulAdd), and this library is compiled with -ffp-contract=off, so
//    no compiler fuses a multiply into an add on any target;
//  * sqrt and division are the exact IEEE operations (no rsqrt/reciprocal approximations);
//  * the 16-bit conversions are written here in integer ops, one implementation for every
//    target: Highway 1.0.3's DemoteTo to bf16 truncates, and its f16 conversions for targets
//    without F16C truncate and turn Inf/NaN into finite numbers. AVX-512-BF16's vcvtneps2bf16 is
//    not used either: it flushes subnormal inputs to zero, which core/half.h's rounding does not,
//    and the step is bound by memory, not by these few integer ops (bench/results/cpu_adam_*).
// The main loop takes whole vectors; the last (count mod lanes) elements run the same body on
// one-lane vectors, so tails give the same bits as the vector part.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "offload/cpu_optimizer_kernels.cpp"
#include "hwy/foreach_target.h"  // must come before highway.h

#include "hwy/highway.h"
#include "offload/cpu_optimizer_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace zero::offload::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- 16-bit storage -------------------------------------------------------------------------

// bf16 bits (in the low half of u32 lanes) -> f32: exact.
template <class D, class VU>
HWY_INLINE hn::Vec<D> bf16_to_f32(D d, VU bits) {
  return hn::BitCast(d, hn::ShiftLeft<16>(bits));
}

// f16 bits -> f32, exact for every value (core/half.h's f16_bits_to_float).
template <class D, class VU>
HWY_INLINE hn::Vec<D> f16_to_f32(D d, VU bits) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const VU sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u)));
  const VU magnitude = hn::And(bits, hn::Set(du, 0x7fffu));
  const VU shifted = hn::ShiftLeft<13>(magnitude);
  const VU normal = hn::Add(shifted, hn::Set(du, 112u << 23));  // rebias 15 -> 127
  const VU inf_nan = hn::Or(shifted, hn::Set(du, 0x7f800000u));
  // Zero and subnormals: mantissa * 2^-24, exact in f32.
  const VU subnormal = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(d, hn::BitCast(di, magnitude)), hn::Set(d, 1.0f / 16777216.0f)));
  const auto is_subnormal = hn::RebindMask(du, hn::Lt(hn::BitCast(di, magnitude), hn::Set(di, 0x400)));
  const auto is_inf_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, 0x7bff)));
  const VU out = hn::IfThenElse(is_subnormal, subnormal, hn::IfThenElse(is_inf_nan, inf_nan, normal));
  return hn::BitCast(d, hn::Or(out, sign));
}

// f32 -> bf16 bits in u32 lanes, round to nearest even; NaN stays a quiet NaN.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> f32_to_bf16(D /*d*/, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7fffu)), lsb));
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x0040u));
  const auto magnitude = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(magnitude, hn::Set(di, 0x7f800000)));
  return hn::IfThenElse(is_nan, quiet_nan, rounded);
}

// f32 -> f16 bits in u32 lanes, round to nearest even with subnormals, overflow to Inf, NaN kept
// quiet with its top payload bits (core/half.h's float_to_f16_bits).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> f32_to_f16(D d, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
  const auto magnitude = hn::And(bits, hn::Set(du, 0x7fffffffu));
  const auto mag_i = hn::BitCast(di, magnitude);
  // Normal halves: rebias the exponent (127 -> 15) and round 23 -> 10 mantissa bits to nearest
  // even; a carry moves into the exponent, as it should.
  const auto lsb = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<13>(
      hn::Add(hn::Sub(magnitude, hn::Set(du, 112u << 23)), hn::Add(hn::Set(du, 0x0fffu), lsb)));
  // Below 2^-14 the half is subnormal: bits = round(|x| * 2^24), rounded to nearest even by the
  // f32 addition of 2^23 (|x| * 2^24 < 1024 is exact, so no other rounding happens).
  const auto scaled = hn::Mul(hn::BitCast(d, magnitude), hn::Set(d, 16777216.0f));
  const auto subnormal =
      hn::Sub(hn::BitCast(du, hn::Add(scaled, hn::Set(d, 8388608.0f))), hn::Set(du, 0x4b000000u));
  const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 0x3ffu)));
  const auto is_subnormal = hn::RebindMask(du, hn::Lt(mag_i, hn::Set(di, 0x38800000)));
  const auto is_overflow = hn::RebindMask(du, hn::Gt(mag_i, hn::Set(di, 0x477fefff)));  // >= 65520
  const auto is_nan = hn::RebindMask(du, hn::Gt(mag_i, hn::Set(di, 0x7f800000)));
  auto out = hn::IfThenElse(is_subnormal, subnormal, normal);
  out = hn::IfThenElse(is_overflow, hn::Set(du, 0x7c00u), out);
  out = hn::IfThenElse(is_nan, nan, out);
  return hn::Or(out, sign);
}

template <class D>
HWY_INLINE hn::Vec<D> load(D d, const void* base, Storage storage, int64_t i) {
  if (storage == Storage::kF32) return hn::LoadU(d, static_cast<const float*>(base) + i);
  const hn::Rebind<uint16_t, D> d16;
  const hn::RebindToUnsigned<D> du;
  const auto bits = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const uint16_t*>(base) + i));
  return storage == Storage::kBF16 ? bf16_to_f32(d, bits) : f16_to_f32(d, bits);
}

template <class D>
HWY_INLINE void store(D d, hn::Vec<D> v, void* base, Storage storage, int64_t i) {
  if (storage == Storage::kF32) {
    hn::StoreU(v, d, static_cast<float*>(base) + i);
    return;
  }
  const hn::Rebind<uint16_t, D> d16;
  const hn::RebindToSigned<D> di;
  const auto bits = storage == Storage::kBF16 ? f32_to_bf16(d, v) : f32_to_f16(d, v);
  // Every value is below 2^16, so the saturating narrowing only drops the zero upper halves.
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, static_cast<uint16_t*>(base) + i);
}

template <class D>
HWY_INLINE hn::Vec<D> load_grad(D d, const ChunkBuffers& b, int64_t i) {
  auto g = load(d, b.grads, b.grad_storage, i);
  if (b.grad_scale != 1.0f) g = hn::Mul(g, hn::Set(d, b.grad_scale));
  if (b.clip_coefficient != 1.0f) g = hn::Mul(g, hn::Set(d, b.clip_coefficient));
  return g;
}

template <class D>
HWY_INLINE void store_master(D d, hn::Vec<D> p, const ChunkBuffers& b, int64_t i) {
  hn::StoreU(p, d, b.master + i);
  if (b.param_copy != nullptr) store(d, p, b.param_copy, b.copy_storage, i);
}

// Runs body(d, i) over [begin, begin + count): whole vectors, then one-lane vectors for the tail.
template <class Body>
HWY_INLINE void for_each_vector(int64_t begin, int64_t count, const Body& body) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t end = begin + count;
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) body(d, i);
  const hn::CappedTag<float, 1> d1;
  for (; i < end; ++i) body(d1, i);
}

// ---- kernels (formulas: backend/cpu/cpu_optimizers.cpp) --------------------------------------

void AdamChunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdamConstants& c) {
  for_each_vector(begin, count, [&](auto d, int64_t i) {
    auto g = load_grad(d, b, i);
    auto p = hn::LoadU(d, b.master + i);
    auto m = load(d, b.state[0], b.state_storage, i);
    auto v = load(d, b.state[1], b.state_storage, i);
    // The L2 term is added even when the segment's decay is 0, as the reference does: g + 0 * p
    // can differ from g in the sign of a zero.
    if (!c.decoupled) g = hn::Add(g, hn::Mul(hn::Set(d, c.l2), p));
    m = hn::Add(hn::Mul(hn::Set(d, c.b1), m), hn::Mul(hn::Set(d, c.one_minus_b1), g));
    v = hn::Add(hn::Mul(hn::Set(d, c.b2), v), hn::Mul(hn::Mul(hn::Set(d, c.one_minus_b2), g), g));
    const auto denom = hn::Add(hn::Mul(hn::Sqrt(v), hn::Set(d, c.inv_sqrt_bc2)), hn::Set(d, c.eps));
    if (c.decoupled) p = hn::Sub(p, hn::Mul(hn::Set(d, c.decay), p));
    p = hn::Sub(p, hn::Div(hn::Mul(hn::Set(d, c.step_size), m), denom));
    store(d, m, b.state[0], b.state_storage, i);
    store(d, v, b.state[1], b.state_storage, i);
    store_master(d, p, b, i);
  });
}

// Lamb's moments and direction from the stored state (shared by both passes).
template <class D>
HWY_INLINE void lamb_moments(D d, const ChunkBuffers& b, const LambConstants& c, int64_t i,
                             hn::Vec<D>& p, hn::Vec<D>& m, hn::Vec<D>& v, hn::Vec<D>& u) {
  const auto g = load_grad(d, b, i);
  p = hn::LoadU(d, b.master + i);
  m = load(d, b.state[0], b.state_storage, i);
  v = load(d, b.state[1], b.state_storage, i);
  m = hn::Add(hn::Mul(hn::Set(d, c.b1), m), hn::Mul(hn::Set(d, c.one_minus_b1), g));
  v = hn::Add(hn::Mul(hn::Set(d, c.b2), v), hn::Mul(hn::Mul(hn::Set(d, c.one_minus_b2), g), g));
  const auto denom = hn::Add(hn::Sqrt(hn::Mul(v, hn::Set(d, c.inv_bc2))), hn::Set(d, c.eps));
  u = hn::Add(hn::Div(hn::Mul(m, hn::Set(d, c.inv_bc1)), denom), hn::Mul(hn::Set(d, c.wd), p));
}

void LambDirectionChunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LambConstants& c,
                        float* direction) {
  for_each_vector(begin, count, [&](auto d, int64_t i) {
    hn::Vec<decltype(d)> p, m, v, u;
    lamb_moments(d, b, c, i, p, m, v, u);
    hn::StoreU(u, d, direction + (i - begin));
  });
}

void LambApplyChunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LambConstants& c,
                    float step) {
  for_each_vector(begin, count, [&](auto d, int64_t i) {
    hn::Vec<decltype(d)> p, m, v, u;
    lamb_moments(d, b, c, i, p, m, v, u);
    p = hn::Sub(p, hn::Mul(hn::Set(d, step), u));
    store(d, m, b.state[0], b.state_storage, i);
    store(d, v, b.state[1], b.state_storage, i);
    store_master(d, p, b, i);
  });
}

void LionChunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LionConstants& c) {
  for_each_vector(begin, count, [&](auto d, int64_t i) {
    const auto g = load_grad(d, b, i);
    auto p = hn::LoadU(d, b.master + i);
    auto m = load(d, b.state[0], b.state_storage, i);
    const auto interp = hn::Add(hn::Mul(hn::Set(d, c.b1), m), hn::Mul(hn::Set(d, c.one_minus_b1), g));
    const auto zero = hn::Zero(d);
    // sign(c): +1, -1, and 0 for zeros and NaN (neither comparison holds).
    const auto sign = hn::IfThenElse(hn::Gt(interp, zero), hn::Set(d, 1.0f),
                                     hn::IfThenElse(hn::Lt(interp, zero), hn::Set(d, -1.0f), zero));
    p = hn::Sub(hn::Mul(p, hn::Set(d, c.keep)), hn::Mul(hn::Set(d, c.lr), sign));
    m = hn::Add(hn::Mul(hn::Set(d, c.b2), m), hn::Mul(hn::Set(d, c.one_minus_b2), g));
    store(d, m, b.state[0], b.state_storage, i);
    store_master(d, p, b, i);
  });
}

void AdagradChunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdagradConstants& c) {
  for_each_vector(begin, count, [&](auto d, int64_t i) {
    auto p = hn::LoadU(d, b.master + i);
    auto s = load(d, b.state[0], b.state_storage, i);
    const auto g = hn::Add(load_grad(d, b, i), hn::Mul(hn::Set(d, c.l2), p));
    s = hn::Add(s, hn::Mul(g, g));
    const auto denom = hn::Add(hn::Sqrt(s), hn::Set(d, c.eps));
    p = hn::Sub(p, hn::Div(hn::Mul(hn::Set(d, c.lr), g), denom));
    store(d, s, b.state[0], b.state_storage, i);
    store_master(d, p, b, i);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace zero::offload::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace zero::offload::kernels {

HWY_EXPORT(AdamChunk);
HWY_EXPORT(LambDirectionChunk);
HWY_EXPORT(LambApplyChunk);
HWY_EXPORT(LionChunk);
HWY_EXPORT(AdagradChunk);

void adam_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdamConstants& c) {
  HWY_DYNAMIC_DISPATCH(AdamChunk)(b, begin, count, c);
}
void lamb_direction_chunk(const ChunkBuffers& b, int64_t begin, int64_t count,
                          const LambConstants& c, float* direction) {
  HWY_DYNAMIC_DISPATCH(LambDirectionChunk)(b, begin, count, c, direction);
}
void lamb_apply_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LambConstants& c,
                      float step) {
  HWY_DYNAMIC_DISPATCH(LambApplyChunk)(b, begin, count, c, step);
}
void lion_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LionConstants& c) {
  HWY_DYNAMIC_DISPATCH(LionChunk)(b, begin, count, c);
}
void adagrad_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdagradConstants& c) {
  HWY_DYNAMIC_DISPATCH(AdagradChunk)(b, begin, count, c);
}

}  // namespace zero::offload::kernels
#endif  // HWY_ONCE
