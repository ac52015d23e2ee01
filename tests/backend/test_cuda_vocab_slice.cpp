// The CUDA vocabulary-slice ops (Backend::embedding_*_slice, cross_entropy_slice_*) against the
// CPU oracle on the same inputs, f32 and bf16 storage: a slice of columns [6, 13) of a 20-token
// vocabulary with targets inside, outside and ignored, and ids inside and outside the slice.
// Statistics are f64 on both; the GPU reads elements as f32 (tolerances as the fused loss's).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

constexpr int64_t kRows = 5, kCols = 7, kFirst = 6, kChannels = 4, kIgnore = -100;

class CudaVocabSliceTest : public CudaTest, public ::testing::WithParamInterface<DType> {};

TEST_P(CudaVocabSliceTest, CrossEntropyPassesMatchTheCpu) {
  const DType dtype = GetParam();
  const std::vector<float> x = random_values(kRows * kCols, 7, -4.0f, 4.0f);
  const std::vector<int64_t> targets = {6, 12, 0, kIgnore, 19};  // in, in, out, ignored, out
  const std::vector<float> max_in = {5.0f, 4.5f, 6.0f, 1.0f, 3.0f};  // a group max >= the slice's
  std::vector<std::vector<double>> results[2];
  Backend* backends[2] = {&cpu(), &gpu()};
  for (int b = 0; b < 2; ++b) {
    Backend& be = *backends[b];
    Tensor logits = upload(be, x, {kRows, kCols}, dtype);
    Tensor tg = upload_ids(be, targets);
    Tensor row_max = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    be.cross_entropy_slice_max(row_max, logits);
    results[b].push_back(download(be, row_max));
    Tensor group_max = upload(be, max_in, {kRows}, DType::kF64);
    Tensor sum_exp = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    Tensor target_logit = be.empty({kRows}, DType::kF64, MemoryCategory::kOther);
    be.cross_entropy_slice_sums(sum_exp, target_logit, logits, group_max, tg, kFirst);
    results[b].push_back(download(be, sum_exp));
    results[b].push_back(download(be, target_logit));
    Tensor losses = be.empty({kRows}, DType::kF32, MemoryCategory::kOther);
    be.cross_entropy_slice_finish(losses, &logits, logits, group_max, sum_exp, target_logit, tg,
                                  kFirst, kIgnore, 0.5);
    results[b].push_back(download(be, losses));
    results[b].push_back(download(be, logits));
  }
  const char* what[] = {"row_max", "sum_exp", "target_logit", "losses", "dlogits"};
  for (size_t i = 0; i < results[0].size(); ++i) {
    expect_close(results[0][i], results[1][i], storage_tolerance(dtype, 1e-5, 1e-6),
                 std::string(what[i]) + " " + name_of(dtype));
  }
}

TEST_P(CudaVocabSliceTest, EmbeddingSliceMatchesTheCpu) {
  const DType dtype = GetParam();
  const std::vector<float> table = random_values(kCols * kChannels, 8);
  const std::vector<float> dout = random_values(kRows * kChannels, 9);
  const std::vector<int32_t> ids = {6, 12, 3, 6, 19};  // in, in, out, repeated, out
  std::vector<std::vector<double>> results[2];
  Backend* backends[2] = {&cpu(), &gpu()};
  for (int b = 0; b < 2; ++b) {
    Backend& be = *backends[b];
    Tensor t = upload(be, table, {kCols, kChannels}, dtype);
    Tensor id = upload_ids(be, ids);
    Tensor out = be.empty({kRows, kChannels}, dtype, MemoryCategory::kOther);
    be.embedding_forward_slice(out, id, t, kFirst, false);
    be.embedding_forward_slice(out, id, t, kFirst, true);
    results[b].push_back(download(be, out));
    Tensor dtable = be.zeros({kCols, kChannels}, dtype, MemoryCategory::kOther);
    be.embedding_backward_slice(dtable, upload(be, dout, {kRows, kChannels}, dtype), id, kFirst);
    results[b].push_back(download(be, dtable));
  }
  expect_close(results[0][0], results[1][0], storage_tolerance(dtype, 1e-6, 0.0), "rows");
  expect_close(results[0][1], results[1][1], storage_tolerance(dtype, 1e-6, 1e-7), "dtable");
}

INSTANTIATE_TEST_SUITE_P(Storage, CudaVocabSliceTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& param_info) { return std::string(name_of(param_info.param)); });

}  // namespace
}  // namespace zero::backend::cuda_test
