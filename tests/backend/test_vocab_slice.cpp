// The vocabulary-slice ops (Backend::embedding_*_slice, cross_entropy_slice_*) against the
// whole-vocabulary ops on the CPU: the vocabulary is cut into uneven slices, the slices' passes
// are combined as a tensor-parallel group combines them (max, then sums), and the losses and the
// concatenated dlogits / embedding rows equal the full ops' - f64 to 1e-12 (only the order of
// the sums differs), f32 to 1e-6 relative, bf16 logits to bf16 rounding; the simulated device
// gives the CPU's numbers exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"

namespace zero::backend {
namespace vocab_slice_test {

constexpr int64_t kRows = 6, kVocab = 11, kChannels = 5, kIgnore = -100;
const std::vector<int64_t> kCuts = {0, 4, 8, 11};  // three slices of 4, 4, 3 columns

Tensor host_values(const Shape& shape, uint64_t seed, double spread) {
  Tensor t = Tensor::zeros_host(shape, DType::kF64);
  uint64_t x = 0x9E3779B97F4A7C15ULL * seed + 3;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t.data<double>()[i] = spread * (static_cast<double>(x % 2001) / 1000.0 - 1.0);
  }
  return t;
}

Tensor targets_host() {
  Tensor t = Tensor::zeros_host({kRows}, DType::kI64);
  const int64_t values[kRows] = {3, 10, kIgnore, 0, 7, 4};  // every slice owns some target
  std::copy_n(values, kRows, t.data<int64_t>());
  return t;
}

Tensor host_f64(const std::vector<double>& values) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(values.size())}, DType::kF64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

// A device tensor of `dtype` holding the f64 host values; and back.
Tensor upload(Backend& be, const Tensor& host64, DType dtype) {
  Tensor cast = Tensor::zeros_host(host64.shape(), dtype);
  CpuBackend().copy(cast, host64);
  Tensor out = be.empty(host64.shape(), dtype, MemoryCategory::kOther);
  be.copy_from_host(out, cast.raw_data());
  return out;
}
std::vector<double> download(Backend& be, const Tensor& t) {
  Tensor host = Tensor::zeros_host(t.shape(), t.dtype());
  be.copy_to_host(host.raw_data(), t);
  Tensor wide = Tensor::zeros_host(t.shape(), DType::kF64);
  CpuBackend().copy(wide, host);
  return std::vector<double>(wide.data<double>(), wide.data<double>() + wide.numel());
}
// Columns [begin, end) of a host [rows, cols] f64 tensor.
Tensor columns(const Tensor& full, int64_t begin, int64_t end) {
  const int64_t rows = full.size(0), cols = full.size(1);
  Tensor out = Tensor::zeros_host({rows, end - begin}, DType::kF64);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = begin; c < end; ++c) {
      out.data<double>()[r * (end - begin) + c - begin] = full.data<double>()[r * cols + c];
    }
  }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(worst, tol * scale) << what << ": max difference " << worst << " at scale " << scale;
}

struct SliceCase {
  DType dtype;
  bool simulated;
  double tolerance;
};

class VocabSliceTest : public ::testing::TestWithParam<SliceCase> {
 protected:
  std::unique_ptr<Backend> make() {
    if (GetParam().simulated) return std::make_unique<SimulatedDeviceBackend>();
    return std::make_unique<CpuBackend>();
  }
};

TEST_P(VocabSliceTest, SlicedCrossEntropyEqualsTheFullOne) {
  const SliceCase c = GetParam();
  auto device = make();
  Backend& be = *device;
  const DType stats = stats_dtype(c.dtype);
  const Tensor logits64 = host_values({kRows, kVocab}, 1, 8.0);  // wide logits: a real max
  const Tensor targets = upload(be, targets_host(), DType::kI64);
  const double scale = 0.25;

  // The whole row at once.
  Tensor logits = upload(be, logits64, c.dtype);
  Tensor losses = be.empty({kRows}, stats, MemoryCategory::kOther);
  be.softmax_cross_entropy(losses, &logits, logits, targets, kIgnore, scale);
  const std::vector<double> want_losses = download(be, losses);
  const std::vector<double> want_dlogits = download(be, logits);

  // Three slices, combined between passes as the group's all-reduces would.
  std::vector<Tensor> parts;
  for (size_t s = 0; s + 1 < kCuts.size(); ++s) {
    parts.push_back(upload(be, columns(logits64, kCuts[s], kCuts[s + 1]), c.dtype));
  }
  std::vector<double> row_max(kRows, -INFINITY), sum_exp(kRows, 0.0), target(kRows, 0.0);
  for (const Tensor& part : parts) {
    Tensor m = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    be.cross_entropy_slice_max(m, part);
    const std::vector<double> got = download(be, m);
    for (int64_t r = 0; r < kRows; ++r) row_max[r] = std::max(row_max[r], got[r]);
  }
  const Tensor group_max = upload(be, host_f64(row_max), DType::kF64);
  for (size_t s = 0; s < parts.size(); ++s) {
    Tensor sums = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    Tensor tgt = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    be.cross_entropy_slice_sums(sums, tgt, parts[s], group_max, targets, kCuts[s]);
    const std::vector<double> a = download(be, sums), b = download(be, tgt);
    for (int64_t r = 0; r < kRows; ++r) {
      sum_exp[r] += a[r];
      target[r] += b[r];
    }
  }
  const Tensor group_sum = upload(be, host_f64(sum_exp), DType::kF64);
  const Tensor group_target = upload(be, host_f64(target), DType::kF64);
  std::vector<double> dlogits(static_cast<size_t>(kRows * kVocab));
  for (size_t s = 0; s < parts.size(); ++s) {
    Tensor part_losses = be.empty({kRows}, stats, MemoryCategory::kOther);
    be.cross_entropy_slice_finish(part_losses, &parts[s], parts[s], group_max, group_sum,
                                  group_target, targets, kCuts[s], kIgnore, scale);
    expect_close(download(be, part_losses), want_losses, c.tolerance, "losses of a slice");
    const std::vector<double> d = download(be, parts[s]);
    const int64_t width = kCuts[s + 1] - kCuts[s];
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < width; ++j) {
        dlogits[static_cast<size_t>(r * kVocab + kCuts[s] + j)] = d[static_cast<size_t>(r * width + j)];
      }
    }
  }
  expect_close(dlogits, want_dlogits, c.tolerance, "dlogits");
}

TEST_P(VocabSliceTest, SlicedEmbeddingEqualsTheFullOne) {
  const SliceCase c = GetParam();
  auto device = make();
  Backend& be = *device;
  const Tensor table64 = host_values({kVocab, kChannels}, 2, 1.0);
  const Tensor dout64 = host_values({kRows, kChannels}, 3, 1.0);
  Tensor ids_host = Tensor::zeros_host({kRows}, DType::kI32);
  const int32_t ids_values[kRows] = {3, 10, 3, 0, 7, 9};  // a repeated id accumulates
  std::copy_n(ids_values, kRows, ids_host.data<int32_t>());
  Tensor ids = be.empty({kRows}, DType::kI32, MemoryCategory::kOther);
  be.copy_from_host(ids, ids_host.raw_data());

  Tensor table = upload(be, table64, c.dtype);
  Tensor want = be.empty({kRows, kChannels}, c.dtype, MemoryCategory::kOther);
  be.embedding_forward(want, ids, table, false);
  Tensor want_grad = be.zeros({kVocab, kChannels}, c.dtype, MemoryCategory::kOther);
  Tensor dout = upload(be, dout64, c.dtype);
  be.embedding_backward(want_grad, dout, ids);
  const std::vector<double> want_grad_host = download(be, want_grad);

  // Each slice's rows (zero for other ids), summed over slices as the all-reduce sums them.
  Tensor got = be.zeros({kRows, kChannels}, c.dtype, MemoryCategory::kOther);
  for (size_t s = 0; s + 1 < kCuts.size(); ++s) {
    const int64_t rows = kCuts[s + 1] - kCuts[s];
    Tensor rows_host = Tensor::zeros_host({rows, kChannels}, DType::kF64);
    std::copy_n(table64.data<double>() + kCuts[s] * kChannels, rows * kChannels,
                rows_host.data<double>());
    Tensor table_part = upload(be, rows_host, c.dtype);
    Tensor rows_out = be.empty({kRows, kChannels}, c.dtype, MemoryCategory::kOther);
    be.embedding_forward_slice(rows_out, ids, table_part, kCuts[s], false);
    be.add(got, rows_out, 1.0);
    be.embedding_forward_slice(rows_out, ids, table_part, kCuts[s], true);  // accumulate: x2 own
    Tensor grad_part = be.zeros({rows, kChannels}, c.dtype, MemoryCategory::kOther);
    be.embedding_backward_slice(grad_part, dout, ids, kCuts[s]);
    const std::vector<double> g = download(be, grad_part);
    const std::vector<double> want_rows(want_grad_host.begin() + kCuts[s] * kChannels,
                                        want_grad_host.begin() + kCuts[s + 1] * kChannels);
    expect_close(g, want_rows, c.tolerance, "embedding gradient rows of a slice");
    const std::vector<double> doubled = download(be, rows_out);
    const std::vector<double> table_rows = download(be, table_part);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t local = ids_values[r] - kCuts[s];
      for (int64_t j = 0; j < kChannels; ++j) {
        const double expected =
            local >= 0 && local < rows ? 2.0 * table_rows[static_cast<size_t>(local * kChannels + j)] : 0.0;
        EXPECT_EQ(doubled[static_cast<size_t>(r * kChannels + j)], expected) << r << "," << j;
      }
    }
  }
  expect_close(download(be, got), download(be, want), c.tolerance, "embedding rows");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VocabSliceTest,
                         ::testing::Values(SliceCase{DType::kF64, false, 1e-12},
                                           SliceCase{DType::kF32, false, 1e-6},
                                           SliceCase{DType::kBF16, false, 1e-2},
                                           SliceCase{DType::kF64, true, 1e-12}),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param.dtype)) +
                                  (param_info.param.simulated ? "_simulated" : "_cpu");
                         });

}  // namespace vocab_slice_test
}  // namespace zero::backend
