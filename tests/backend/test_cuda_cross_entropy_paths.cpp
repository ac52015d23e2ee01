// The two paths of the CUDA fused softmax cross-entropy (cuda_cross_entropy.cu) against the CPU
// oracle: rows staged in shared memory with 16-byte vectors (GPT-2's width and anything that
// fits), with their scalar heads and tails (rows that do not start on a 16-byte boundary, widths
// that are not a multiple of the vector, dlogits aligned unlike the logits), and the streaming
// kernel for rows too wide for shared memory. Each case: losses (in the logits' dtype and in f32),
// dlogits written over the logits and into another buffer, padding left untouched, ignored rows,
// non-finite logits, bad targets reported, and bitwise determinism. Skipped without a GPU (runs
// on the CUDA simulator under ZERO_CUDA=SIM).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr int64_t kIgnore = -100;

// Tolerances as in test_cuda_ops.cpp's CrossEntropy test: the losses are logs of f64 sums of f32
// exponentials (expf vs the CPU's polynomial: an ulp each; the staged path adds a vector's 4 or 8
// terms in f32 first: a few ulps of the sum), so 1e-5 relative; gradients are probabilities with
// ulp-level differences, plus one rounding unit of a 16-bit storage type.
Tolerance loss_tolerance(DType dtype) { return storage_tolerance(dtype, 1e-5, 1e-5); }
Tolerance grad_tolerance(DType dtype) { return storage_tolerance(dtype, 1e-5, 1e-8); }

// expect_close, with infinities required exactly (its limit is infinite where the CPU's is).
void expect_near_cpu(std::vector<double> cpu, std::vector<double> gpu, Tolerance tol,
                     const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isinf(cpu[i]) || std::isinf(gpu[i])) {
      EXPECT_EQ(cpu[i], gpu[i]) << what << "[" << i << "]";
      cpu[i] = gpu[i] = 0.0;
    }
  }
  expect_close(cpu, gpu, tol, what);
}

bool streaming_forced() {
  const char* choice = std::getenv("ZERO_CUDA_CROSS_ENTROPY");
  return choice != nullptr && std::strcmp(choice, "streaming") == 0;
}

// The CPU oracle on contiguous rows: losses then dlogits (scaled by grad_scale).
struct Expected {
  std::vector<double> losses, dlogits;
};
Expected cpu_oracle(CpuBackend& cpu, const std::vector<float>& logits, int64_t rows,
                    int64_t vocab, const std::vector<int64_t>& targets, DType dtype,
                    double grad_scale) {
  Tensor tl = upload(cpu, logits, {rows, vocab}, dtype);
  Tensor tt = upload_ids(cpu, targets);
  Tensor losses = cpu.empty({rows}, dtype, MemoryCategory::kOther);
  cpu.softmax_cross_entropy(losses, &tl, tl, tt, kIgnore, grad_scale);
  return {download(cpu, losses), download(cpu, tl)};
}

// `values` (rows x vocab) in a device buffer of rows x pitch elements starting `skew` elements in,
// NaN everywhere else; `view` is the [rows, vocab] view the op takes.
struct Placed {
  Tensor base, view;
  std::vector<uint8_t> bytes;  // as uploaded, for the untouched-padding check
};
Placed place(Backend& be, const std::vector<float>& values, int64_t rows, int64_t vocab,
             int64_t pitch, int64_t skew, DType dtype) {
  std::vector<float> host(static_cast<size_t>(rows * pitch + skew),
                          std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) host[skew + r * pitch + c] = values[r * vocab + c];
  }
  Placed p;
  p.base = upload(be, host, {static_cast<int64_t>(host.size())}, dtype);
  p.view = Tensor(p.base.storage(), dtype, {rows, vocab}, {pitch, 1}, skew);
  p.bytes = host_bytes(host, dtype);
  return p;
}

// The view's elements row by row, widened (copy_to_host packs strided rows).
std::vector<double> rows_of(Backend& be, const Placed& p) { return download(be, p.view); }

void expect_outside_untouched(Backend& be, const Placed& p, int64_t rows, int64_t vocab,
                              int64_t pitch, int64_t skew, const std::string& what) {
  const std::vector<uint8_t> now = download_bytes(be, p.base);
  const size_t e = p.base.element_size();
  std::vector<bool> inside(now.size() / e, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) inside[skew + r * pitch + c] = true;
  }
  int64_t changed = 0;
  for (size_t i = 0; i < inside.size(); ++i) {
    if (!inside[i] && std::memcmp(now.data() + i * e, p.bytes.data() + i * e, e) != 0) ++changed;
  }
  EXPECT_EQ(changed, 0) << what << ": elements outside the view that were written";
}

struct Layout {
  int64_t pitch_extra;  // pitch = vocab + pitch_extra
  int64_t skew;         // elements from the buffer's (256-byte aligned) start to row 0
};

class CudaCrossEntropyPaths : public CudaTest {
 protected:
  // Runs the GPU on `logits` placed as `layout`, twice: dlogits over the logits (dtype losses),
  // and dlogits into a second buffer placed as `dl_layout` (f32 losses); both against the CPU.
  void check(const std::vector<float>& logits, int64_t rows, int64_t vocab,
             const std::vector<int64_t>& targets, DType dtype, Layout layout, Layout dl_layout,
             const std::string& what) {
    const double scale = 0.5;
    const Expected want = cpu_oracle(cpu(), logits, rows, vocab, targets, dtype, scale);
    const int64_t pitch = vocab + layout.pitch_extra, dl_pitch = vocab + dl_layout.pitch_extra;
    Tensor tt = upload_ids(gpu(), targets);

    Placed in_place = place(gpu(), logits, rows, vocab, pitch, layout.skew, dtype);
    Tensor losses = gpu().empty({rows}, dtype, MemoryCategory::kOther);
    gpu().softmax_cross_entropy(losses, &in_place.view, in_place.view, tt, kIgnore, scale);
    expect_near_cpu(want.losses, download(gpu(), losses), loss_tolerance(dtype), what + " losses");
    expect_near_cpu(want.dlogits, rows_of(gpu(), in_place), grad_tolerance(dtype),
                 what + " dlogits over the logits");
    expect_outside_untouched(gpu(), in_place, rows, vocab, pitch, layout.skew, what + " in place");

    Placed src = place(gpu(), logits, rows, vocab, pitch, layout.skew, dtype);
    Placed dl = place(gpu(), std::vector<float>(logits.size(), 7.0f), rows, vocab, dl_pitch,
                      dl_layout.skew, dtype);
    Tensor losses_f32 = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
    gpu().softmax_cross_entropy(losses_f32, &dl.view, src.view, tt, kIgnore, scale);
    expect_near_cpu(want.losses, download(gpu(), losses_f32), loss_tolerance(dtype),
                 what + " f32 losses");
    expect_near_cpu(want.dlogits, rows_of(gpu(), dl), grad_tolerance(dtype),
                 what + " dlogits in another buffer");
    expect_outside_untouched(gpu(), dl, rows, vocab, dl_pitch, dl_layout.skew, what + " dlogits");
    EXPECT_EQ(download_bytes(gpu(), src.base), src.bytes) << what << ": logits were written";
  }
};

std::vector<int64_t> targets_for(int64_t rows, int64_t vocab) {
  std::vector<int64_t> t;
  for (int64_t r = 0; r < rows; ++r) t.push_back((r * 7919 + 3) % vocab);
  return t;
}

TEST_F(CudaCrossEntropyPaths, GptWidthRowsAreStagedAndTooWideOnesStream) {
  if (streaming_forced()) GTEST_SKIP() << "ZERO_CUDA_CROSS_ENTROPY=streaming";
  for (DType dtype : kStorageTypes) {
    EXPECT_TRUE(cuda::softmax_cross_entropy_stages_rows(dtype, 1031)) << dtype_name(dtype);
    EXPECT_TRUE(cuda::softmax_cross_entropy_stages_rows(dtype, 50257)) << dtype_name(dtype);
    EXPECT_FALSE(cuda::softmax_cross_entropy_stages_rows(dtype, 151936)) << dtype_name(dtype);
  }
  EXPECT_FALSE(cuda::softmax_cross_entropy_stages_rows(DType::kF32, 60000));
  EXPECT_TRUE(cuda::softmax_cross_entropy_stages_rows(DType::kBF16, 60000));
}

TEST_F(CudaCrossEntropyPaths, StagedRowsMatchTheCpuAlignedOrNot) {
  // 1031 is not a multiple of 8 or 4: every row has a scalar tail. Layouts: packed rows (each
  // row's skew differs), 16-byte rows, rows all one element past the boundary, and dlogits
  // aligned like the logits or not.
  const int64_t rows = 7, vocab = 1031;
  std::vector<int64_t> targets = targets_for(rows, vocab);
  targets[2] = kIgnore;
  targets[4] = 0;          // in the unaligned head where there is one
  targets[5] = vocab - 1;  // in the tail
  const std::vector<float> logits = random_values(rows * vocab, 71, -8.0f, 8.0f);
  const Layout layouts[][2] = {{{0, 0}, {0, 0}},
                               {{1, 0}, {9, 0}},   // 16-byte pitch in 16-bit types
                               {{9, 1}, {9, 1}},   // every row one element in
                               {{3, 2}, {5, 0}}};  // skews differ between logits and dlogits
  for (DType dtype : kStorageTypes) {
    for (const auto& l : layouts) {
      check(logits, rows, vocab, targets, dtype, l[0], l[1],
            std::string(dtype_name(dtype)) + " pitch +" + std::to_string(l[0].pitch_extra) +
                " skew " + std::to_string(l[0].skew));
    }
  }
}

TEST_F(CudaCrossEntropyPaths, RowsNarrowerThanAVectorAndInt32Targets) {
  const int64_t rows = 5, vocab = 5;
  const std::vector<float> logits = random_values(rows * vocab, 72, -3.0f, 3.0f);
  for (DType dtype : kStorageTypes) {
    check(logits, rows, vocab, targets_for(rows, vocab), dtype, {2, 3}, {0, 0},
          std::string(dtype_name(dtype)) + " vocab 5");
  }
  // i32 targets take the same kernels with another id type.
  Tensor tl = upload(gpu(), logits, {rows, vocab}, DType::kBF16);
  Tensor t64 = upload_ids(gpu(), targets_for(rows, vocab));
  std::vector<int32_t> narrow;
  for (int64_t t : targets_for(rows, vocab)) narrow.push_back(static_cast<int32_t>(t));
  Tensor t32 = upload_ids(gpu(), narrow);
  Tensor a = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
  Tensor b = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
  gpu().softmax_cross_entropy(a, nullptr, tl, t64, kIgnore, 1.0);
  gpu().softmax_cross_entropy(b, nullptr, tl, t32, kIgnore, 1.0);
  EXPECT_EQ(download_bytes(gpu(), a), download_bytes(gpu(), b));
}

TEST_F(CudaCrossEntropyPaths, RowsTooWideForSharedMemoryStream) {
  // f32 rows of 60000 (240 KB) and 16-bit rows of 120000 exceed the H100's 227 KB per block.
  for (DType dtype : kStorageTypes) {
    const int64_t vocab = dtype == DType::kF32 ? 60000 : 120000, rows = 2;
    if (!streaming_forced()) {
      EXPECT_FALSE(cuda::softmax_cross_entropy_stages_rows(dtype, vocab));
    }
    const std::vector<float> logits = random_values(rows * vocab, 73, -8.0f, 8.0f);
    check(logits, rows, vocab, targets_for(rows, vocab), dtype, {3, 1}, {0, 0},
          std::string(dtype_name(dtype)) + " streaming vocab " + std::to_string(vocab));
  }
}

TEST_F(CudaCrossEntropyPaths, NonFiniteLogitsBehaveAsOnTheCpu) {
  // Row 0: NaN at the start; row 1: NaN in the tail; row 2: -inf logits (zero probability), one
  // of them in the head; row 3: the target's logit is -inf (an infinite loss, gradient -scale).
  const int64_t rows = 4, vocab = 1031;
  std::vector<float> logits = random_values(rows * vocab, 74, -4.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  logits[0] = std::nanf("");
  logits[vocab + vocab - 2] = std::nanf("");
  logits[2 * vocab + 0] = -inf;
  logits[2 * vocab + 500] = -inf;
  std::vector<int64_t> targets = {5, 6, 7, 40};
  logits[3 * vocab + 40] = -inf;
  for (DType dtype : kStorageTypes) {
    check(logits, rows, vocab, targets, dtype, {3, 1}, {3, 1},
          std::string(dtype_name(dtype)) + " non-finite");
  }
}

TEST_F(CudaCrossEntropyPaths, BadTargetsAreReportedAndTheResultIsDeterministic) {
  const int64_t rows = 3, vocab = 1031;
  const std::vector<float> logits = random_values(rows * vocab, 75, -8.0f, 8.0f);
  Tensor tl = upload(gpu(), logits, {rows, vocab}, DType::kBF16);
  Tensor losses = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
  Tensor bad = upload_ids(gpu(), std::vector<int64_t>{1, vocab, 2});
  gpu().softmax_cross_entropy(losses, nullptr, tl, bad, kIgnore, 1.0);
  try {
    gpu().synchronize();
    ADD_FAILURE() << "a target equal to the vocabulary size was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1031"), std::string::npos) << e.what();
  }
  // Same inputs, same bits (fixed reduction order per row).
  Tensor good = upload_ids(gpu(), targets_for(rows, vocab));
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    Tensor copy = upload(gpu(), logits, {rows, vocab}, DType::kBF16);
    gpu().softmax_cross_entropy(losses, &copy, copy, good, kIgnore, 1.0);
    std::vector<uint8_t> bits = download_bytes(gpu(), losses);
    const std::vector<uint8_t> grads = download_bytes(gpu(), copy);
    bits.insert(bits.end(), grads.begin(), grads.end());
    if (run == 0) {
      first = bits;
    } else {
      EXPECT_EQ(bits, first);
    }
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
