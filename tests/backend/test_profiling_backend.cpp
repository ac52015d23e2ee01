// The kernel profiler (backend/profiling/): a ProfilingBackend forwards every op unchanged, and
// while a profile is open files each call under its op, shapes and dtype with its time and the
// FLOPs the MFU convention gives it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/profiling/profiling_backend.h"
#include "backend/sim/simulated_device_backend.h"

namespace zero::backend {
namespace {

using backend_test::download;
using backend_test::random_values;

// f32 tensors of `values` (the profiler's ops here all run in f32).
Tensor upload(Backend& be, const std::vector<float>& values, const Shape& shape) {
  return backend_test::upload(be, values, shape, DType::kF32);
}

const KernelRecord* find_row(const KernelProfile& profile, const std::string& op) {
  for (const KernelRecord& r : profile.records) {
    if (r.op == op) return &r;
  }
  return nullptr;
}

// A small attention forward + linear forward/backward, the same on any backend.
struct SmallStep {
  std::vector<double> y, dx, dw, out;
  void run(Backend& be) {
    Tensor x = upload(be, random_values(6 * 4, 1), {6, 4});
    Tensor w = upload(be, random_values(3 * 4, 2), {3, 4});
    Tensor y_t = be.empty({6, 3}, DType::kF32, MemoryCategory::kActivations);
    be.linear_forward(y_t, x, w, nullptr);
    Tensor dx_t = be.empty({6, 4}, DType::kF32, MemoryCategory::kActivations);
    Tensor dw_t = be.zeros({3, 4}, DType::kF32, MemoryCategory::kGrads);
    be.linear_backward(&dx_t, dw_t, nullptr, y_t, x, w);
    be.linear_backward(nullptr, dw_t, nullptr, y_t, x, w);
    Tensor q = upload(be, random_values(2 * 5 * 3 * 4, 3), {2, 5, 3, 4});
    Tensor k = upload(be, random_values(2 * 5 * 3 * 4, 4), {2, 5, 3, 4});
    Tensor v = upload(be, random_values(2 * 5 * 3 * 4, 5), {2, 5, 3, 4});
    Tensor out_t = be.empty({2, 5, 3, 4}, DType::kF32, MemoryCategory::kActivations);
    Tensor lse = be.empty({2, 3, 5}, DType::kF32, MemoryCategory::kActivations);
    be.attention_forward(out_t, lse, q, k, v, 0.5, 0);
    be.attention_forward(out_t, lse, q, k, v, 0.5, 2);
    y = download(be, y_t);
    dx = download(be, dx_t);
    dw = download(be, dw_t);
    out = download(be, out_t);
  }
};

TEST(ProfilingBackend, ForwardsEveryResultUnchanged) {
  CpuBackend plain;
  SmallStep expected;
  expected.run(plain);
  ProfilingBackend profiled(std::make_unique<CpuBackend>());
  SmallStep unprofiled;
  unprofiled.run(profiled);
  profiled.start_profile();
  SmallStep during;
  during.run(profiled);
  profiled.stop_profile(1, 1.0);
  for (const SmallStep* s : {&unprofiled, &during}) {
    EXPECT_EQ(s->y, expected.y);
    EXPECT_EQ(s->dx, expected.dx);
    EXPECT_EQ(s->dw, expected.dw);
    EXPECT_EQ(s->out, expected.out);
  }
}

TEST(ProfilingBackend, FilesCallsWithTheirFlops) {
  ProfilingBackend be(std::make_unique<CpuBackend>());
  be.start_profile();
  SmallStep step;
  step.run(be);
  const KernelProfile profile = be.stop_profile(7, 0.5);
  EXPECT_EQ(profile.step, 7);
  EXPECT_EQ(profile.device, "cpu");
  EXPECT_DOUBLE_EQ(profile.step_seconds, 0.5);

  // x[6,4] @ w[3,4]^T: 6*4*3 multiply-adds, 2 FLOPs each.
  const KernelRecord* forward = find_row(profile, "linear_forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->calls, 1);
  EXPECT_EQ(forward->shape, "x[6,4] w[3,4]");
  EXPECT_EQ(forward->dtype, "f32");
  EXPECT_DOUBLE_EQ(forward->flops, 2.0 * 6 * 4 * 3);
  // Backward with dx: two such products; without: one.
  const KernelRecord* backward = find_row(profile, "linear_backward");
  ASSERT_NE(backward, nullptr);
  EXPECT_DOUBLE_EQ(backward->flops, 2.0 * 2.0 * 6 * 4 * 3);
  const KernelRecord* dw_only = find_row(profile, "linear_backward (dw only)");
  ASSERT_NE(dw_only, nullptr);
  EXPECT_DOUBLE_EQ(dw_only->flops, 2.0 * 6 * 4 * 3);

  // Causal attention over T = 5: 15 kept scores; window 2: 1 + 2 + 2 + 2 + 2 = 9. QK^T and PV
  // each cost head_dim (4) multiply-adds per score, for each of B*H = 6 sequences and heads.
  int attention_rows = 0;
  for (const KernelRecord& r : profile.records) {
    if (r.op != "attention_forward") continue;
    ++attention_rows;
    const double scores = r.shape.find("window 2") != std::string::npos ? 9.0 : 15.0;
    EXPECT_DOUBLE_EQ(r.flops, 2.0 * 2.0 * 4 * 6 * scores) << r.shape;
  }
  EXPECT_EQ(attention_rows, 2);  // the windowed call is its own row

  // Uploads and downloads are rows too; nothing else does matrix products.
  const KernelRecord* uploads = find_row(profile, "copy_from_host");
  ASSERT_NE(uploads, nullptr);
  EXPECT_EQ(uploads->flops, 0.0);
  EXPECT_NE(find_row(profile, "copy_to_host"), nullptr);

  double sum = 0.0;
  for (size_t i = 0; i < profile.records.size(); ++i) {
    EXPECT_GE(profile.records[i].seconds, 0.0);
    if (i > 0) {
      EXPECT_GE(profile.records[i - 1].seconds, profile.records[i].seconds);
    }
    sum += profile.records[i].seconds;
  }
  EXPECT_DOUBLE_EQ(profile.kernel_seconds, sum);
}

TEST(ProfilingBackend, RecordsNothingOutsideAProfile) {
  ProfilingBackend be(std::make_unique<CpuBackend>());
  SmallStep before;
  before.run(be);
  be.start_profile();
  EXPECT_TRUE(be.profiling());
  KernelProfile empty = be.stop_profile(1, 0.0);
  EXPECT_FALSE(be.profiling());
  EXPECT_TRUE(empty.records.empty());
  EXPECT_EQ(empty.kernel_seconds, 0.0);
  SmallStep after;
  after.run(be);
  be.start_profile();
  EXPECT_TRUE(be.stop_profile(2, 0.0).records.empty());
}

TEST(ProfilingBackend, TimesTheWorkOfEachCall) {
  // A product big enough to take measurable time on any CPU, next to a tiny one.
  ProfilingBackend be(std::make_unique<CpuBackend>());
  const int64_t n = 256;
  Tensor a = upload(be, random_values(n * n, 6), {n, n});
  Tensor c = be.empty({n, n}, DType::kF32, MemoryCategory::kOther);
  Tensor tiny = be.zeros({1}, DType::kF32, MemoryCategory::kOther);
  be.start_profile();
  const auto start = std::chrono::steady_clock::now();
  be.matmul(c, a, false, a, true, 1.0, 0.0);
  be.scale(tiny, 2.0);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const KernelProfile profile = be.stop_profile(1, wall);
  const KernelRecord* product = find_row(profile, "matmul");
  ASSERT_NE(product, nullptr);
  EXPECT_EQ(product->shape, "a[256,256] b[256,256] bT");
  EXPECT_DOUBLE_EQ(product->flops, 2.0 * n * n * n);
  EXPECT_GT(product->seconds, 0.0);
  EXPECT_LE(profile.kernel_seconds, wall);
}

TEST(ProfilingBackend, CountsTransfersAndForwardsStreams) {
  auto inner_owner = std::make_unique<SimulatedDeviceBackend>();
  SimulatedDeviceBackend& inner = *inner_owner;
  ProfilingBackend be(std::move(inner_owner));
  EXPECT_EQ(be.device(), inner.device());
  Tensor x = upload(be, {1, 2, 3, 4}, {4});
  EXPECT_EQ(x.device(), inner.device());
  EXPECT_EQ(be.transfer_stats().host_to_device_calls, 1);
  EXPECT_EQ(inner.transfer_stats().host_to_device_calls, 1);
  {
    StreamGuard guard(be, StreamKind::kTransfer);
    EXPECT_EQ(inner.current_stream(), StreamKind::kTransfer);
    const Event done = be.record_event(StreamKind::kTransfer);
    be.wait_event(StreamKind::kCompute, done);
  }
  EXPECT_EQ(inner.current_stream(), StreamKind::kCompute);
  EXPECT_EQ(inner.waits_on(StreamKind::kCompute), 1);
  // The simulated device (host timing by default) profiles as well.
  be.start_profile();
  EXPECT_EQ(be.squared_norm(x), 30.0);
  const KernelProfile profile = be.stop_profile(1, 1.0);
  EXPECT_EQ(profile.device, "sim:0");
  EXPECT_NE(find_row(profile, "sum_squares"), nullptr);
}

TEST(KernelProfile, TableAndJson) {
  KernelProfile profile;
  profile.device = "cuda:0";
  profile.step = 20;
  profile.step_seconds = 0.010;
  add_kernel_call(profile.records, "linear_forward", "x[8,4] w[2,4]", "bf16", 0.002, 4e9);
  add_kernel_call(profile.records, "linear_forward", "x[8,4] w[2,4]", "bf16", 0.002, 4e9);
  add_kernel_call(profile.records, "gelu_forward", "x[8,4]", "bf16", 0.001, 0.0);
  add_kernel_call(profile.records, "add", "y[8,4]", "bf16", 0.003, 0.0);
  finish_kernel_profile(profile);
  ASSERT_EQ(profile.records.size(), 3u);
  EXPECT_EQ(profile.records[0].op, "linear_forward");  // 4 ms, the most
  EXPECT_EQ(profile.records[0].calls, 2);
  EXPECT_DOUBLE_EQ(profile.kernel_seconds, 0.008);

  const std::string table = format_kernel_profile(profile, 2);
  EXPECT_NE(table.find("kernel profile of step 20 on cuda:0"), std::string::npos) << table;
  EXPECT_NE(table.find("linear_forward"), std::string::npos);
  EXPECT_NE(table.find("2.00"), std::string::npos) << table;  // 8 GFLOP in 4 ms = 2 TFLOP/s
  EXPECT_EQ(table.find("gelu_forward"), std::string::npos) << table;  // beyond 2 rows
  EXPECT_NE(table.find("(1 more kinds, 1 calls)"), std::string::npos) << table;
  EXPECT_NE(table.find("80.0% of the step"), std::string::npos) << table;

  const nlohmann::json json = nlohmann::json::parse(kernel_profile_json(profile));
  EXPECT_EQ(json["device"], "cuda:0");
  EXPECT_EQ(json["step"], 20);
  EXPECT_DOUBLE_EQ(json["kernel_seconds"].get<double>(), 0.008);
  ASSERT_EQ(json["kernels"].size(), 3u);
  EXPECT_EQ(json["kernels"][0]["op"], "linear_forward");
  EXPECT_EQ(json["kernels"][0]["calls"], 2);
  EXPECT_DOUBLE_EQ(json["kernels"][0]["flops"].get<double>(), 8e9);
  EXPECT_EQ(json["kernels"][2]["shape"], "x[8,4]");
}

}  // namespace
}  // namespace zero::backend
