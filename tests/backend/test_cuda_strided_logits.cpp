// The LM head's logits on the CUDA backend live in rows padded to 16 bytes
// (Backend::preferred_row_elements) and every op they pass through takes the [rows, V] view:
// linear_forward writes it, softmax_cross_entropy reads it and writes dlogits over it, scale and
// linear_backward read it, copy_to_host packs it. Each op is checked on a row-strided view
// against the CPU oracle on the contiguous equivalent, with the padding poisoned (NaN) before
// and required bit-identical after (a NaN read from it would also poison the results). A
// >= 2 GFLOP product on padded rows must run without the pitched copies (no workspace beyond
// cuBLASLt's), and a tiny GPT-2 with an odd vocabulary must give the CPU's loss, logits and
// gradients. Tolerances as in test_cuda_ops.cpp (stated per check). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/profiling/profiling_backend.h"
#include "core/host_convert.h"
#include "cuda_test_support.h"
#include "model/step_context.h"
#include "model/transformer_builder.h"
#include "support/gradcheck.h"

namespace zero::backend::cuda_test {
namespace {

const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// A [rows, cols] view of a [rows, pitch] buffer holding `values` (row-major, cols per row) with
// NaN in every padding element; `bytes` keeps what was uploaded for the padding check.
struct Padded {
  Tensor base;
  Tensor view;
  std::vector<uint8_t> bytes;
};

Padded upload_padded(Backend& be, const std::vector<float>& values, int64_t rows, int64_t cols,
                     int64_t pitch, DType dtype) {
  std::vector<float> host(static_cast<size_t>(rows * pitch),
                          std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) host[r * pitch + c] = values[r * cols + c];
  }
  Padded p;
  p.base = upload(be, host, {rows, pitch}, dtype);
  p.view = p.base.narrow(1, 0, cols);
  p.bytes = host_bytes(host, dtype);
  return p;
}

// Every padding byte of `p.base` as uploaded.
void expect_padding_untouched(Backend& be, const Padded& p, const std::string& what) {
  const std::vector<uint8_t> now = download_bytes(be, p.base);
  const int64_t rows = p.base.size(0), pitch = p.base.size(1), cols = p.view.size(1);
  const size_t e = p.base.element_size();
  int64_t changed = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t from = (r * pitch + cols) * e, to = (r + 1) * pitch * e;
    if (std::memcmp(now.data() + from, p.bytes.data() + from, to - from) != 0) ++changed;
  }
  EXPECT_EQ(changed, 0) << what << ": rows whose padding was written";
}

class CudaStridedLogits : public CudaTest {
 protected:
  // The row length the CUDA backend pads `cols` to; the test needs real padding.
  int64_t pitch_of(int64_t cols, DType dtype) {
    const int64_t pitch = gpu().preferred_row_elements(cols, dtype);
    EXPECT_GT(pitch, cols) << "choose a width that is not a multiple of 16 bytes";
    return pitch;
  }
};

TEST_F(CudaStridedLogits, TheGpuPadsRowsTo16BytesAndTheCpuKeepsThemExact) {
  EXPECT_EQ(gpu().preferred_row_elements(50257, DType::kBF16), 50264);
  EXPECT_EQ(gpu().preferred_row_elements(50257, DType::kF16), 50264);
  EXPECT_EQ(gpu().preferred_row_elements(50257, DType::kF32), 50260);
  EXPECT_EQ(gpu().preferred_row_elements(50264, DType::kBF16), 50264);  // already aligned
  EXPECT_EQ(gpu().preferred_row_elements(0, DType::kBF16), 0);
  EXPECT_EQ(cpu().preferred_row_elements(50257, DType::kBF16), 50257);
  EXPECT_EQ(cpu().preferred_row_elements(50257, DType::kF32), 50257);
  // The profiling decorator asks its inner backend: a profiled step allocates the same rows.
  ProfilingBackend profiled(std::make_unique<CudaBackend>(0));
  EXPECT_EQ(profiled.preferred_row_elements(50257, DType::kBF16), 50264);
}

TEST_F(CudaStridedLogits, CopyToHostPacksTheRowsOfAStridedView) {
  const int64_t rows = 13, cols = 37;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> values = random_values(rows * cols, 1);
    const Padded p = upload_padded(gpu(), values, rows, cols, pitch_of(cols, dtype), dtype);
    EXPECT_EQ(download_bytes(gpu(), p.view), host_bytes(values, dtype)) << dtype_name(dtype);
    // A [.., rows, cols] view of a 3-D padded buffer: the leading dimensions flatten to rows.
    const int64_t pitch = p.base.size(1);
    Tensor three_d(p.base.storage(), dtype, {1, rows, cols}, {rows * pitch, pitch, 1}, 0);
    EXPECT_EQ(download_bytes(gpu(), three_d), host_bytes(values, dtype)) << dtype_name(dtype);
  }
}

TEST_F(CudaStridedLogits, LayoutsTheOpsCannotHandleAreRejected) {
  const int64_t rows = 6, cols = 10;
  const std::vector<float> values = random_values(8 * 16, 2);
  Tensor buffer = upload(gpu(), values, {8, 16}, DType::kF32);
  const auto& storage = buffer.storage();
  // A strided last dimension (a transposed view), rows closer than a row's length, and rows at
  // uneven strides (two blocks of three 16-element rows, 64 elements apart).
  Tensor transposed(storage, DType::kF32, {cols, rows}, {1, 16}, 0);
  Tensor overlapping(storage, DType::kF32, {rows, cols}, {cols - 1, 1}, 0);
  Tensor uneven(storage, DType::kF32, {2, 3, cols}, {64, 16, 1}, 0);
  for (Tensor* bad : {&transposed, &overlapping, &uneven}) {
    std::vector<uint8_t> host(bad->nbytes());
    EXPECT_THROW(gpu().copy_to_host(host.data(), *bad), ShapeError) << bad->describe();
    EXPECT_THROW(gpu().scale(*bad, 2.0), ShapeError) << bad->describe();
  }
  // The row-strided view is fine where the op says so, not where it has a bias to broadcast.
  Tensor view = buffer.narrow(0, 0, rows).narrow(1, 0, cols);
  Tensor x = upload(gpu(), random_values(rows * 4, 3), {rows, 4}, DType::kF32);
  Tensor w = upload(gpu(), random_values(cols * 4, 4), {cols, 4}, DType::kF32);
  Tensor bias = upload(gpu(), random_values(cols, 5), {cols}, DType::kF32);
  EXPECT_NO_THROW(gpu().linear_forward(view, x, w, nullptr));
  EXPECT_THROW(gpu().linear_forward(view, x, w, &bias), ShapeError);
  EXPECT_THROW(gpu().linear_forward(overlapping, x, w, nullptr), ShapeError);
  Tensor dx = gpu().empty({rows, 4}, DType::kF32, MemoryCategory::kOther);
  Tensor dw = gpu().zeros({cols, 4}, DType::kF32, MemoryCategory::kOther);
  Tensor dbias = gpu().zeros({cols}, DType::kF32, MemoryCategory::kOther);
  EXPECT_NO_THROW(gpu().linear_backward(&dx, dw, nullptr, view, x, w));
  EXPECT_THROW(gpu().linear_backward(&dx, dw, &dbias, view, x, w), ShapeError);
  EXPECT_THROW(gpu().linear_backward(&dx, dw, nullptr, overlapping, x, w), ShapeError);
  // In-place dlogits must be the logits view itself, not the same start at another stride.
  Tensor targets = upload_ids<int64_t>(gpu(), {0, 1, 2, 3, 4, 5});
  Tensor losses = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
  Tensor other_stride(storage, DType::kF32, {rows, cols}, {cols, 1}, 0);
  EXPECT_THROW(gpu().softmax_cross_entropy(losses, &other_stride, view, targets, -100, 1.0),
               ShapeError);
  EXPECT_THROW(gpu().softmax_cross_entropy(losses, nullptr, transposed, targets, -100, 1.0),
               ShapeError);
}

TEST_F(CudaStridedLogits, ScaleOnAStridedViewMatchesTheCpuBitForBit) {
  const int64_t rows = 21, cols = 1001;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> values = random_values(rows * cols, 6);
    Tensor c = upload(cpu(), values, {rows, cols}, dtype);
    const Padded g = upload_padded(gpu(), values, rows, cols, pitch_of(cols, dtype), dtype);
    cpu().scale(c, -0.37);
    Tensor view = g.view;
    gpu().scale(view, -0.37);
    // The same f32 multiply and one rounding per element: bit for bit.
    EXPECT_EQ(download_bytes(cpu(), c), download_bytes(gpu(), g.view)) << dtype_name(dtype);
    expect_padding_untouched(gpu(), g, std::string("scale ") + dtype_name(dtype));
  }
}

TEST_F(CudaStridedLogits, LinearForwardIntoPaddedRowsMatchesTheCpu) {
  const int64_t batch = 5, seq = 9, rows = batch * seq, in = 67, out = 29;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> x = random_values(rows * in, 7), w = random_values(out * in, 8);
    Tensor cx = upload(cpu(), x, {batch, seq, in}, dtype), cw = upload(cpu(), w, {out, in}, dtype);
    Tensor cy = cpu().empty({batch, seq, out}, dtype, MemoryCategory::kOther);
    cpu().linear_forward(cy, cx, cw, nullptr);
    Tensor gx = upload(gpu(), x, {batch, seq, in}, dtype), gw = upload(gpu(), w, {out, in}, dtype);
    const Padded gy = upload_padded(gpu(), std::vector<float>(rows * out, std::nanf("")), rows,
                                    out, pitch_of(out, dtype), dtype);
    // y as [B, T, out] over the padded [B*T, pitch] rows.
    Tensor y3(gy.base.storage(), dtype, {batch, seq, out},
              {seq * gy.base.size(1), gy.base.size(1), 1}, 0);
    gpu().linear_forward(y3, gx, gw, nullptr);
    // Sums of 67 products in another order: f32 rounding, 1e-5 relative plus 3e-5 absolute.
    expect_close(download(cpu(), cy), download(gpu(), y3), storage_tolerance(dtype, 1e-5, 3e-5),
                 std::string("strided linear_forward ") + dtype_name(dtype));
    expect_padding_untouched(gpu(), gy, std::string("linear_forward y ") + dtype_name(dtype));
  }
}

TEST_F(CudaStridedLogits, LinearBackwardFromPaddedRowsMatchesTheCpu) {
  const int64_t rows = 45, in = 67, out = 29;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> x = random_values(rows * in, 9), w = random_values(out * in, 10);
    const std::vector<float> dy = random_values(rows * out, 11), dw0 = random_values(out * in, 12);
    std::vector<double> results[2][2];
    Padded gdy = upload_padded(gpu(), dy, rows, out, pitch_of(out, dtype), dtype);
    for (int slot = 0; slot < 2; ++slot) {
      Backend& be = slot == 0 ? static_cast<Backend&>(cpu()) : gpu();
      Tensor tx = upload(be, x, {rows, in}, dtype), tw = upload(be, w, {out, in}, dtype);
      Tensor tdy = slot == 0 ? upload(be, dy, {rows, out}, dtype) : gdy.view;
      Tensor dx = upload(be, std::vector<float>(rows * in, std::nanf("")), {rows, in}, dtype);
      Tensor dw = upload(be, dw0, {out, in}, dtype);
      be.linear_backward(&dx, dw, nullptr, tdy, tx, tw);
      results[slot][0] = download(be, dx);
      results[slot][1] = download(be, dw);
    }
    // Sums of up to 67 products in another order, as in test_cuda_ops.cpp.
    const std::string what = std::string("strided linear_backward ") + dtype_name(dtype);
    expect_close(results[0][0], results[1][0], storage_tolerance(dtype, 1e-5, 3e-5), what + " dx");
    expect_close(results[0][1], results[1][1], storage_tolerance(dtype, 1e-5, 3e-5),
                 what + " dw (accumulated)");
    expect_padding_untouched(gpu(), gdy, what + " dy");
  }
}

TEST_F(CudaStridedLogits, CrossEntropyOnPaddedRowsMatchesTheCpuInPlaceAndOutOfPlace) {
  const int64_t rows = 19, vocab = 1031;
  std::vector<int64_t> targets;
  for (int64_t r = 0; r < rows; ++r) targets.push_back((r * 97) % vocab);
  targets[3] = -100;  // an ignored row: its dlogits are zeros, its padding still untouched
  targets[7] = vocab - 1;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> logits = random_values(rows * vocab, 13, -8.0f, 8.0f);
    Tensor cl = upload(cpu(), logits, {rows, vocab}, dtype);
    Tensor ct = upload_ids(cpu(), targets);
    Tensor closs = cpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
    cpu().softmax_cross_entropy(closs, &cl, cl, ct, -100, 0.25);

    const int64_t pitch = pitch_of(vocab, dtype);
    Tensor gt = upload_ids(gpu(), targets);
    // Out of place: logits padded one way, dlogits another (pitch + 8 elements).
    Padded in_logits = upload_padded(gpu(), logits, rows, vocab, pitch, dtype);
    Padded out_grad = upload_padded(gpu(), std::vector<float>(rows * vocab, std::nanf("")), rows,
                                    vocab, pitch + 8, dtype);
    Tensor loss_a = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
    gpu().softmax_cross_entropy(loss_a, &out_grad.view, in_logits.view, gt, -100, 0.25);
    // In place, as the LM head runs it.
    Padded inplace = upload_padded(gpu(), logits, rows, vocab, pitch, dtype);
    Tensor loss_b = gpu().empty({rows}, DType::kF32, MemoryCategory::kOther);
    gpu().softmax_cross_entropy(loss_b, &inplace.view, inplace.view, gt, -100, 0.25);

    // As test_cuda_ops.cpp: losses 1e-5 relative (expf vs the CPU's exp); gradients of
    // probabilities ~1e-3 with ulp-level differences.
    const std::string what = std::string("strided cross entropy ") + dtype_name(dtype);
    const std::vector<double> cpu_loss = download(cpu(), closs), cpu_grad = download(cpu(), cl);
    expect_close(cpu_loss, download(gpu(), loss_a), storage_tolerance(DType::kF32, 1e-5, 1e-5),
                 what + " losses (out of place)");
    expect_close(cpu_loss, download(gpu(), loss_b), storage_tolerance(DType::kF32, 1e-5, 1e-5),
                 what + " losses (in place)");
    expect_close(cpu_grad, download(gpu(), out_grad.view), storage_tolerance(dtype, 1e-5, 1e-8),
                 what + " dlogits (out of place)");
    expect_close(cpu_grad, download(gpu(), inplace.view), storage_tolerance(dtype, 1e-5, 1e-8),
                 what + " dlogits (in place)");
    expect_padding_untouched(gpu(), in_logits, what + " logits");
    expect_padding_untouched(gpu(), out_grad, what + " dlogits");
    expect_padding_untouched(gpu(), inplace, what + " in-place logits");
  }
}

// GPT-2's case at test size: 2048 x 768 x 1001 bf16 (3.1 GFLOP per product, past the 2 GFLOP
// where unaligned rows get pitched copies). With y and dy in padded rows no copy is made: the
// only workspace alive besides cuBLASLt's own buffer is an f32 sum: of dx, whose inner dimension
// 1001 is split into 896 + 105 (cuda_gemm_split.h), or without the split (ZERO_CUDA_GEMM_SPLIT=0)
// the smaller one of the bf16 dw the product adds to (gemm_through_f32), whereas the same product into exact rows allocates pitched scratch (the control, which shows
// the measure can see a copy).
TEST_F(CudaStridedLogits, ALargeProductOnPaddedRowsRunsWithoutPitchedCopies) {
  const int64_t rows = 2048, in = 768, out = 1001;
  const DType dtype = DType::kBF16;
  const std::vector<float> x = random_values(rows * in, 14), w = random_values(out * in, 15);
  const std::vector<float> dy = random_values(rows * out, 16);
  Tensor gx = upload(gpu(), x, {rows, in}, dtype), gw = upload(gpu(), w, {out, in}, dtype);
  {  // cuBLASLt's workspace is made by the first product; make it outside the measured window
    Tensor y = gpu().empty({8, out}, dtype, MemoryCategory::kOther);
    Tensor x8 = gx.narrow(0, 0, 8);
    gpu().linear_forward(y, x8, gw, nullptr);
  }
  Allocator& memory = gpu().allocator();
  const auto extra_workspace = [&](const std::function<void()>& work) {
    gpu().synchronize();
    memory.reset_peaks();
    const size_t before = memory.stats().live(MemoryCategory::kWorkspace);
    work();
    gpu().synchronize();
    return memory.stats().peak(MemoryCategory::kWorkspace) - before;
  };

  const int64_t pitch = pitch_of(out, dtype);
  Padded gy = upload_padded(gpu(), std::vector<float>(rows * out, std::nanf("")), rows, out, pitch,
                            dtype);
  Padded gdy = upload_padded(gpu(), dy, rows, out, pitch, dtype);
  Tensor gdx = gpu().empty({rows, in}, dtype, MemoryCategory::kOther);
  Tensor gdw = gpu().zeros({out, in}, dtype, MemoryCategory::kOther);
  const char* split_env = std::getenv("ZERO_CUDA_GEMM_SPLIT");
  const bool split = split_env == nullptr || std::string(split_env) != "0";
  const size_t f32_sum_bytes = split ? static_cast<size_t>(rows * in) * sizeof(float)
                                    : static_cast<size_t>(out * in) * sizeof(float);
  const uint64_t splits_before = gpu().split_products();
  EXPECT_EQ(extra_workspace([&] {
              gpu().linear_forward(gy.view, gx, gw, nullptr);
              gpu().linear_backward(&gdx, gdw, nullptr, gdy.view, gx, gw);
            }),
            f32_sum_bytes)
      << "a padded logits product made scratch copies";
  // y split along n, dw along m, dx along k.
  if (split) {
    EXPECT_EQ(gpu().split_products() - splits_before, 3u);
  }
  expect_padding_untouched(gpu(), gy, "large y");
  expect_padding_untouched(gpu(), gdy, "large dy");

  const char* pitched_env = std::getenv("ZERO_CUDA_PITCHED_GEMM");
  if (pitched_env == nullptr || std::string(pitched_env) != "0") {
    Tensor exact = gpu().empty({rows, out}, dtype, MemoryCategory::kOther);
    EXPECT_GT(extra_workspace([&] { gpu().linear_forward(exact, gx, gw, nullptr); }), 0u)
        << "the control: exact 1001-element rows should have been pitched";
  }

  // And the results are the CPU's. Sums of up to K = 2048 products in another order: f32
  // rounding of sqrt(K)-sized partial sums, as test_cuda_ops.cpp: 1e-5 relative + 5e-4.
  Tensor cx = upload(cpu(), x, {rows, in}, dtype), cw = upload(cpu(), w, {out, in}, dtype);
  Tensor cy = cpu().empty({rows, out}, dtype, MemoryCategory::kOther);
  cpu().linear_forward(cy, cx, cw, nullptr);
  Tensor cdy = upload(cpu(), dy, {rows, out}, dtype);
  Tensor cdx = cpu().empty({rows, in}, dtype, MemoryCategory::kOther);
  Tensor cdw = cpu().zeros({out, in}, dtype, MemoryCategory::kOther);
  cpu().linear_backward(&cdx, cdw, nullptr, cdy, cx, cw);
  const Tolerance tol = storage_tolerance(dtype, 1e-5, 5e-4);
  expect_close(download(cpu(), cy), download(gpu(), gy.view), tol, "large padded y");
  expect_close(download(cpu(), cdx), download(gpu(), gdx), tol, "large padded dx");
  expect_close(download(cpu(), cdw), download(gpu(), gdw), tol, "large padded dw");
}

// ---- the LM head end to end ----------------------------------------------------------------

struct ModelRun {
  double loss = 0;
  Tensor logits;  // host f64 [B*T, V]
  Tensor grads;   // host f64, every parameter's gradient (flat order)
  size_t activations_after_forward = 0;  // live activation bytes, the logits among them
};

model::TransformerConfig tiny_gpt2() {
  model::TransformerConfig c = model::preset_config("tiny");
  c.family = model::ModelFamily::kGpt2;
  c.vocab_size = 75;  // 300 bytes (f32) / 150 bytes (bf16) a row: padded on the GPU
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = 16;
  return c;
}

// One training forward (logits captured) and backward with a loss gradient other than 1, so
// the head's scale of its dlogits runs, on a tiny GPT-2 whose vocabulary rows need padding.
// `initial`: the parameters (host, flat, in `dtype`).
ModelRun run_tiny_gpt2(Backend& be, DType dtype, const Tensor& initial) {
  auto net = model::build_transformer(tiny_gpt2(), be, dtype);
  be.copy_from_host(net->flat_params(), initial.raw_data());
  std::mt19937_64 rng(11);
  Tensor ids = Tensor::zeros_host({2, 16}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % 75);
  }
  model::Batch batch = model::batch_from_input_ids(ids);
  batch.targets.data<int64_t>()[5] = model::kIgnoreIndex;
  ModelRun run;
  Tensor logits;
  model::StepContext ctx{be, batch};
  ctx.capture_logits = &logits;
  net->zero_grad();
  run.loss = net->forward(ctx);
  run.activations_after_forward = be.allocator().stats().live(MemoryCategory::kActivations);
  net->backward(ctx, 0.75);
  run.logits = converted_host(logits, DType::kF64);
  Tensor grads = Tensor::zeros_host(net->flat_grads().shape(), net->flat_grads().dtype());
  be.copy_to_host(grads.raw_data(), net->flat_grads());
  run.grads = converted_host(grads, DType::kF64);
  return run;
}

TEST_F(CudaStridedLogits, TheLmHeadGivesTheCpusLossLogitsAndGradients) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    pitch_of(75, dtype);  // the head's logits really are padded on the GPU
    // init_parameters draws f32 (or f64) values; a bf16 model starts from them rounded.
    auto drawn = model::build_transformer(tiny_gpt2(), cpu(), DType::kF32);
    model::init_parameters(*drawn, 7);
    const Tensor initial = converted_host(drawn->flat_params(), dtype);
    const ModelRun reference = run_tiny_gpt2(cpu(), dtype, initial);
    const ModelRun ours = run_tiny_gpt2(gpu(), dtype, initial);
    // f32: the CPU backend's own f32 bound through two layers and reductions of <= 128 terms
    // (test_cuda_hf_reference.cpp), 1e-5. bf16: every stored activation rounded to 8 bits and
    // the GPU's other summation orders flipping roundings, as test_cuda_hf_reference.cpp
    // bounds it: logits 2e-2, loss 1e-3, gradients 5e-2 (a wrong padding moves them by O(1)).
    // The head really kept padded logits: the only activation whose size differs between the
    // backends (every other one has the same shape on both).
    const int64_t rows = 2 * 16, padding = gpu().preferred_row_elements(75, dtype) - 75;
    EXPECT_EQ(ours.activations_after_forward - reference.activations_after_forward,
              static_cast<size_t>(rows * padding) * dtype_size(dtype))
        << dtype_name(dtype) << " live activation bytes: the head's logits were not padded";
    const bool f32 = dtype == DType::kF32;
    const std::string what = dtype_name(dtype);
    EXPECT_LE(std::abs(ours.loss - reference.loss) / std::abs(reference.loss), f32 ? 1e-5 : 1e-3)
        << what << " loss: cpu " << reference.loss << " gpu " << ours.loss;
    EXPECT_LE(zero::testing::relative_error(ours.logits, reference.logits), f32 ? 1e-5 : 2e-2)
        << what << " captured logits";
    EXPECT_LE(zero::testing::relative_error(ours.grads, reference.grads), f32 ? 1e-5 : 5e-2)
        << what << " gradients";
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
