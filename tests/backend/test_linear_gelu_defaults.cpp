// Backend's composed defaults of the GELU-fused linear ops (backend.h), which the CPU oracle
// keeps: the results are the unfused sequence's bit for bit, and the backward frees an
// activation moved into it before it allocates d_up, so its peak memory is the unfused
// sequence's (one [rows, inner] buffer above what the caller holds), not one buffer more.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "core/allocator.h"

namespace zero::backend {
namespace linear_gelu_defaults_test {

using backend_test::download_bytes;
using backend_test::random_values;
using backend_test::upload;

constexpr int64_t kRows = 6, kIn = 8, kInner = 32;

TEST(LinearGeluDefaults, AreTheUnfusedSequenceBitForBit) {
  CpuBackend be;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor x = upload(be, random_values(kRows * kIn, 1), {kRows, kIn}, dtype);
    const Tensor w_up = upload(be, random_values(kInner * kIn, 2), {kInner, kIn}, dtype);
    const Tensor b_up = upload(be, random_values(kInner, 3), {kInner}, dtype);
    const Tensor w_down = upload(be, random_values(kIn * kInner, 4), {kIn, kInner}, dtype);
    const Tensor dy = upload(be, random_values(kRows * kIn, 5), {kRows, kIn}, dtype);
    const std::vector<float> dw0 = random_values(kIn * kInner, 6), db0 = random_values(kIn, 7);

    Tensor act = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    Tensor up = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    be.linear_gelu_forward(act, up, x, w_up, &b_up);
    Tensor dw = upload(be, dw0, {kIn, kInner}, dtype), db = upload(be, db0, {kIn}, dtype);
    const Tensor d_up = be.linear_backward_gelu(dw, &db, dy, act, w_down, up);

    Tensor ref_up = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    Tensor ref_act = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    be.linear_forward(ref_up, x, w_up, &b_up);
    be.gelu_forward(ref_act, ref_up);
    Tensor ref_dw = upload(be, dw0, {kIn, kInner}, dtype), ref_db = upload(be, db0, {kIn}, dtype);
    Tensor d_act = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    be.linear_backward(&d_act, ref_dw, &ref_db, dy, ref_act, w_down);
    Tensor ref_d_up = be.empty({kRows, kInner}, dtype, MemoryCategory::kOther);
    be.gelu_backward(ref_d_up, d_act, ref_up);

    const char* name = dtype_name(dtype);
    EXPECT_EQ(download_bytes(be, up), download_bytes(be, ref_up)) << name;
    EXPECT_EQ(download_bytes(be, act), download_bytes(be, ref_act)) << name;
    EXPECT_EQ(download_bytes(be, d_up), download_bytes(be, ref_d_up)) << name;
    EXPECT_EQ(download_bytes(be, dw), download_bytes(be, ref_dw)) << name;
    EXPECT_EQ(download_bytes(be, db), download_bytes(be, ref_db)) << name;
    EXPECT_EQ(d_up.shape(), up.shape());
  }
}

// The activations' peak during one backward, above what was live before it, in bytes.
size_t backward_peak_above_live(bool move_act) {
  CpuBackend be;
  const auto acts = MemoryCategory::kActivations;
  const Tensor w = upload(be, random_values(kIn * kInner, 4), {kIn, kInner}, DType::kF32);
  const Tensor dy = upload(be, random_values(kRows * kIn, 5), {kRows, kIn}, DType::kF32);
  Tensor dw = upload(be, random_values(kIn * kInner, 6), {kIn, kInner}, DType::kF32);
  Tensor act = be.empty({kRows, kInner}, DType::kF32, acts);
  Tensor up = be.empty({kRows, kInner}, DType::kF32, acts);
  be.fill(act, 0.5);
  be.fill(up, 0.25);
  Allocator& allocator = be.allocator();
  allocator.reset_peaks();
  const size_t live_before = allocator.stats().live(acts);
  Tensor d_up = move_act ? be.linear_backward_gelu(dw, nullptr, dy, std::move(act), w, up)
                         : be.linear_backward_gelu(dw, nullptr, dy, act, w, up);
  return allocator.stats().peak(acts) - live_before;
}

TEST(LinearGeluDefaults, BackwardFreesAMovedInActivationBeforeAllocatingDUp) {
  const size_t buffer = kRows * kInner * sizeof(float);
  // d_act, then act freed and d_up in its place: one buffer above the caller's.
  EXPECT_EQ(backward_peak_above_live(true), buffer);
  // A caller that keeps its own reference keeps act alive: d_act and d_up both on top.
  EXPECT_EQ(backward_peak_above_live(false), 2 * buffer);
}

}  // namespace linear_gelu_defaults_test
}  // namespace zero::backend
