// 1-bit Adam on the CUDA backend against the CPU oracle: the three 1-bit compression ops
// (Backend::onebit_worker_compress, onebit_server_compress, onebit_decompress; cuda_onebit.cu)
// over layouts of 1, 2, 3 and 8 ranks with segments from 1 element to several reduction blocks
// and more segments than one launch takes, and the optimizer's two 1-bit halves (kMomentum,
// kFrozenVarianceAdam; cuda_optimizers.cu). Every output is poisoned before the op, so an element
// a kernel forgets shows. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda_test_support.h"
#include "backend/onebit_layout.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend::cuda_test {
namespace onebit_cuda_test {

using CudaOneBit = CudaTest;

// Bytes that read as a NaN in every f32 and as 0xff in every sign byte: what an output holds
// before an op, so anything left unwritten differs from the oracle's output.
constexpr uint8_t kPoison = 0xff;

// Uniform values in [lo, hi) with exact zeros (every 7th), negative zeros (every 11th) and, on
// request, a NaN (every 997th): the sign rule's edge cases (+0, -0 and NaN count as positive).
std::vector<float> edgy_values(int64_t n, uint32_t seed, float lo, float hi, bool nans = false) {
  std::vector<float> v = random_values(n, seed, lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 7 == 3) v[static_cast<size_t>(i)] = 0.0f;
    if (i % 11 == 5) v[static_cast<size_t>(i)] = -0.0f;
    if (nans && i % 997 == 500) v[static_cast<size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

// A tensor of `be` holding `bytes` (its whole storage) verbatim.
Tensor upload_bytes(Backend& be, const void* bytes, int64_t numel, DType dtype) {
  Tensor t = be.empty({numel}, dtype, MemoryCategory::kOther);
  be.copy_from_host(t, bytes);
  return t;
}
Tensor upload_f32(Backend& be, const std::vector<float>& v) {
  return upload_bytes(be, v.data(), static_cast<int64_t>(v.size()), DType::kF32);
}
Tensor poisoned(Backend& be, int64_t numel, DType dtype) {
  const std::vector<uint8_t> bytes(static_cast<size_t>(numel) * dtype_size(dtype), kPoison);
  return upload_bytes(be, bytes.data(), numel, dtype);
}
std::vector<float> download_f32(Backend& be, const Tensor& t) {
  const std::vector<uint8_t> bytes = download_bytes(be, t);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}
bool same_bits(float a, float b) { return bits_of(a) == bits_of(b); }
// The spacing of f32 values at |x|.
double ulp(float x) {
  const float a = std::fabs(x);
  return static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity())) - a;
}

// A layout case: `world` ranks over segments of a values buffer of n elements.
struct Case {
  std::string name;
  int world = 1;
  std::vector<ParamSegment> segments;
  int64_t n = 0;
};

// Segments of the given lengths, 5 elements apart starting at element 3 (odd offsets: nothing
// 16-byte aligned), in a buffer with 3 elements past the last.
Case spaced_case(const std::string& name, int world, const std::vector<int64_t>& lengths) {
  Case c{name, world, {}, 0};
  int64_t at = 3;
  for (size_t i = 0; i < lengths.size(); ++i) {
    c.segments.push_back({at, lengths[i], i % 2 == 0});
    at += lengths[i] + 5;
  }
  c.n = at + 3;
  return c;
}

std::vector<Case> cases() {
  // 1 and 7: less than a byte; 8: one byte; 4099 and 70000: several blocks of signs a segment
  // (a block covers 8192 elements); 300000: several blocks of signs at every world size.
  const std::vector<int64_t> lengths = {1, 7, 8, 100, 4099, 70000, 300000};
  std::vector<Case> out;
  for (int world : {1, 2, 3, 8}) {
    out.push_back(spaced_case("world " + std::to_string(world), world, lengths));
  }
  // More segments than one launch takes (64), of uneven lengths, one of them long.
  std::vector<int64_t> many;
  for (int i = 0; i < 150; ++i) many.push_back(1 + (i * 37) % 300);
  many[70] = 20000;
  out.push_back(spaced_case("150 segments, world 3", 3, many));
  // A segment of more sign blocks (269) than the scales pass has threads (256), so that its
  // threads add several partial sums each.
  out.push_back(spaced_case("long segment, world 2", 2, {2200003, 5}));
  return out;
}

// Scales and errors of one compression against the oracle's: the scales within 1 f32 ulp, since
// the f64 sums of squares behind them add the same terms in another order (the CPU in 8192-element
// blocks one after another, the device in per-block trees) and so may round to the neighbouring
// f32; where a scale has the oracle's bits, the errors (b - scale * sign) must have theirs too;
// where it is one ulp off, each error may be off by that ulp of the scale plus its own rounding
// (one ulp of the error). NaN matches NaN (a NaN input makes its segment's scale and errors NaN).
// `server`: the errors are each segment's served chunk, else its padded run.
void expect_scales_and_errors(const OneBitLayout& layout, bool server,
                              const std::vector<float>& cpu_scales,
                              const std::vector<float>& gpu_scales,
                              const std::vector<float>& cpu_error,
                              const std::vector<float>& gpu_error, const std::string& what) {
  ASSERT_EQ(cpu_scales.size(), gpu_scales.size()) << what;
  ASSERT_EQ(cpu_error.size(), gpu_error.size()) << what;
  int reported = 0;
  for (int64_t k = 0; k < layout.segment_count(); ++k) {
    const OneBitSegment& s = layout.segments[static_cast<size_t>(k)];
    const float cs = cpu_scales[static_cast<size_t>(k)], gs = gpu_scales[static_cast<size_t>(k)];
    const bool nan = std::isnan(cs) && std::isnan(gs);
    const bool exact = same_bits(cs, gs) || nan;
    if (!exact && !(std::fabs(static_cast<double>(cs) - gs) <= ulp(cs))) {
      ADD_FAILURE() << what << ": scale of segment " << k << " cpu " << cs << " gpu " << gs;
      continue;
    }
    const int64_t first = server ? s.chunk_offset : s.error_offset;
    const int64_t count = server ? layout.chunk(s) : s.padded;
    for (int64_t i = first; i < first + count; ++i) {
      const float ce = cpu_error[static_cast<size_t>(i)], ge = gpu_error[static_cast<size_t>(i)];
      const bool ok = exact ? same_bits(ce, ge) || (std::isnan(ce) && std::isnan(ge))
                            : std::fabs(static_cast<double>(ce) - ge) <=
                                  ulp(std::fabs(cs) > std::fabs(gs) ? cs : gs) +
                                      ulp(std::fabs(ce) > std::fabs(ge) ? ce : ge);
      if (!ok && reported++ < 5) {
        ADD_FAILURE() << what << ": error " << i << " of segment " << k << " cpu " << ce
                      << " gpu " << ge << " (scales cpu " << cs << " gpu " << gs << ")";
      }
    }
  }
}

// Everything one compression writes, downloaded.
struct Compressed {
  std::vector<uint8_t> bits;
  std::vector<float> scales, error;
};

// Two worker compressions on `be`, the second on new values with the errors the first left
// (error feedback); the errors start as -0 (so -0 + -0 stays -0, which counts as positive).
std::vector<Compressed> run_worker(Backend& be, const Case& c, const OneBitLayout& layout,
                                   bool nans) {
  const std::vector<float> start(static_cast<size_t>(layout.worker_elements), -0.0f);
  Tensor error = upload_f32(be, start);
  std::vector<Compressed> out;
  for (uint32_t step = 0; step < 2; ++step) {
    const Tensor values = upload_f32(be, edgy_values(c.n, 100 + step, -1.0f, 1.0f, nans));
    Tensor bits = poisoned(be, layout.world * layout.block_bytes, DType::kU8);
    Tensor scales = poisoned(be, layout.segment_count(), DType::kF32);
    be.reset_transfer_stats();
    be.onebit_worker_compress(bits, scales, error, values, layout);
    // The op enqueues work only: no host read or wait inside it.
    EXPECT_EQ(be.transfer_stats().device_to_host_calls, 0) << c.name;
    EXPECT_EQ(be.transfer_stats().synchronizations, 0) << c.name;
    out.push_back({download_bytes(be, bits), download_f32(be, scales), download_f32(be, error)});
  }
  return out;
}

// One server compression on random received signs and worker scales (some exactly 0) and a
// random server error with zeros and negative zeros.
Compressed run_server(Backend& be, const OneBitLayout& layout) {
  std::mt19937 gen(7);
  std::vector<uint8_t> received(static_cast<size_t>(layout.world * layout.block_bytes));
  for (uint8_t& b : received) b = static_cast<uint8_t>(gen() & 0xffu);
  std::vector<float> worker_scales =
      random_values(layout.world * layout.segment_count(), 8, 0.0f, 2.0f);
  for (size_t i = 0; i < worker_scales.size(); i += 5) worker_scales[i] = 0.0f;
  const Tensor bits_in = upload_bytes(be, received.data(), layout.world * layout.block_bytes,
                                      DType::kU8);
  const Tensor scales_in = upload_f32(be, worker_scales);
  Tensor error = upload_f32(be, edgy_values(layout.server_elements, 9, -0.5f, 0.5f));
  Tensor bits_out = poisoned(be, layout.block_bytes, DType::kU8);
  Tensor scales_out = poisoned(be, layout.segment_count(), DType::kF32);
  be.reset_transfer_stats();
  be.onebit_server_compress(bits_out, scales_out, error, bits_in, scales_in, layout);
  EXPECT_EQ(be.transfer_stats().device_to_host_calls, 0);
  EXPECT_EQ(be.transfer_stats().synchronizations, 0);
  return {download_bytes(be, bits_out), download_f32(be, scales_out), download_f32(be, error)};
}

// Decompression of random signs and gathered scales into a poisoned values buffer: the bytes of
// the whole buffer (the elements between segments must keep their poison).
std::vector<uint8_t> run_decompress(Backend& be, const Case& c, const OneBitLayout& layout) {
  std::mt19937 gen(11);
  std::vector<uint8_t> gathered(static_cast<size_t>(layout.world * layout.block_bytes));
  for (uint8_t& b : gathered) b = static_cast<uint8_t>(gen() & 0xffu);
  const Tensor bits = upload_bytes(be, gathered.data(), layout.world * layout.block_bytes,
                                   DType::kU8);
  const Tensor scales =
      upload_f32(be, random_values(layout.world * layout.segment_count(), 12, 0.0f, 2.0f));
  Tensor values = poisoned(be, c.n, DType::kF32);
  be.reset_transfer_stats();
  be.onebit_decompress(values, bits, scales, layout);
  EXPECT_EQ(be.transfer_stats().device_to_host_calls, 0);
  EXPECT_EQ(be.transfer_stats().synchronizations, 0);
  return download_bytes(be, values);
}

TEST_F(CudaOneBit, WorkerCompressionMatchesTheCpu) {
  for (const Case& c : cases()) {
    const OneBitLayout layout = OneBitLayout::build(c.segments, c.world);
    const std::vector<Compressed> cpu_out = run_worker(cpu(), c, layout, false);
    const std::vector<Compressed> gpu_out = run_worker(gpu(), c, layout, false);
    for (size_t step = 0; step < cpu_out.size(); ++step) {
      const std::string what = c.name + " step " + std::to_string(step);
      // The signs depend on the compensated values alone: bit for bit.
      EXPECT_EQ(cpu_out[step].bits, gpu_out[step].bits) << what;
      expect_scales_and_errors(layout, false, cpu_out[step].scales, gpu_out[step].scales,
                               cpu_out[step].error, gpu_out[step].error, what);
    }
  }
}

// A NaN counts as positive (DeepSpeed's sign().add(1).bool()) and makes its segment's scale and
// errors NaN on both backends; the other segments are unaffected.
TEST_F(CudaOneBit, WorkerCompressionTreatsNaNAsPositive) {
  const Case c = spaced_case("NaN values", 2, {1, 8, 1000, 3000});
  const OneBitLayout layout = OneBitLayout::build(c.segments, c.world);
  const std::vector<Compressed> cpu_out = run_worker(cpu(), c, layout, true);
  const std::vector<Compressed> gpu_out = run_worker(gpu(), c, layout, true);
  for (size_t step = 0; step < cpu_out.size(); ++step) {
    EXPECT_EQ(cpu_out[step].bits, gpu_out[step].bits) << step;
    expect_scales_and_errors(layout, false, cpu_out[step].scales, gpu_out[step].scales,
                             cpu_out[step].error, gpu_out[step].error,
                             "NaN step " + std::to_string(step));
  }
  // Segments [3, +1) and [9, +8) hold no NaN; [22, +1000) holds element 500 and [1027, +3000)
  // elements 1497, 2494 and 3491 (edgy_values puts one at every i % 997 == 500).
  ASSERT_EQ(gpu_out[0].scales.size(), 4u);
  EXPECT_FALSE(std::isnan(gpu_out[0].scales[0]));
  EXPECT_FALSE(std::isnan(gpu_out[0].scales[1]));
  EXPECT_TRUE(std::isnan(gpu_out[0].scales[2]));
  EXPECT_TRUE(std::isnan(gpu_out[0].scales[3]));
}

TEST_F(CudaOneBit, ServerCompressionMatchesTheCpu) {
  for (const Case& c : cases()) {
    const OneBitLayout layout = OneBitLayout::build(c.segments, c.world);
    const Compressed cpu_out = run_server(cpu(), layout);
    const Compressed gpu_out = run_server(gpu(), layout);
    // The averaged values are the same f32 sums in rank order: the same signs.
    EXPECT_EQ(cpu_out.bits, gpu_out.bits) << c.name;
    expect_scales_and_errors(layout, true, cpu_out.scales, gpu_out.scales, cpu_out.error,
                             gpu_out.error, c.name);
  }
}

TEST_F(CudaOneBit, DecompressionMatchesTheCpuBitForBit) {
  for (const Case& c : cases()) {
    const OneBitLayout layout = OneBitLayout::build(c.segments, c.world);
    EXPECT_EQ(run_decompress(cpu(), c, layout), run_decompress(gpu(), c, layout)) << c.name;
  }
}

TEST_F(CudaOneBit, BadArgumentsAreRefusedNamingTheOp) {
  const Case c = spaced_case("bad", 2, {100});
  const OneBitLayout layout = OneBitLayout::build(c.segments, c.world);
  Tensor values = gpu().zeros({c.n}, DType::kF32, MemoryCategory::kOther);
  Tensor error = gpu().zeros({layout.worker_elements}, DType::kF32, MemoryCategory::kOther);
  Tensor scales = gpu().zeros({1}, DType::kF32, MemoryCategory::kOther);
  // One sign byte short.
  Tensor short_bits =
      gpu().zeros({layout.world * layout.block_bytes - 1}, DType::kU8, MemoryCategory::kOther);
  try {
    gpu().onebit_worker_compress(short_bits, scales, error, values, layout);
    ADD_FAILURE() << "a bits buffer of the wrong size accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("onebit_worker_compress"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bits"), std::string::npos) << e.what();
  }
  // A host buffer handed to the device op.
  Tensor bits = gpu().zeros({layout.world * layout.block_bytes}, DType::kU8,
                            MemoryCategory::kOther);
  Tensor gathered_scales = gpu().zeros({layout.world}, DType::kF32, MemoryCategory::kOther);
  Tensor host_values = cpu().zeros({c.n}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(gpu().onebit_decompress(host_values, bits, gathered_scales, layout), ShapeError);
  // Server scales of one rank where the layout has two.
  Tensor bits_out = gpu().zeros({layout.block_bytes}, DType::kU8, MemoryCategory::kOther);
  Tensor server_error =
      gpu().zeros({layout.server_elements}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(gpu().onebit_server_compress(bits_out, scales, server_error, bits, scales, layout),
               ShapeError);
}

// A layout without segments (every parameter tensor empty) has empty buffers: nothing to do.
TEST_F(CudaOneBit, AnEmptyLayoutWritesNothing) {
  const OneBitLayout layout = OneBitLayout::build({}, 3);
  ASSERT_EQ(layout.segment_count(), 0);
  Tensor values = poisoned(gpu(), 5, DType::kF32);
  Tensor bits = gpu().empty({0}, DType::kU8, MemoryCategory::kOther);
  Tensor scales = gpu().empty({0}, DType::kF32, MemoryCategory::kOther);
  Tensor error = gpu().empty({0}, DType::kF32, MemoryCategory::kOther);
  Tensor gathered_scales = gpu().empty({0}, DType::kF32, MemoryCategory::kOther);
  gpu().onebit_worker_compress(bits, scales, error, values, layout);
  gpu().onebit_server_compress(bits, scales, error, bits, gathered_scales, layout);
  gpu().onebit_decompress(values, bits, gathered_scales, layout);
  EXPECT_EQ(download_bytes(gpu(), values), std::vector<uint8_t>(5 * sizeof(float), kPoison));
}

// ---- the optimizer's two halves ----------------------------------------------------------------

// Segments over vector and scalar paths: several 4 Ki chunks, offsets that are no multiple of 4,
// an empty one, gaps left alone, and more segments than one launch takes (96).
std::vector<ParamSegment> uneven_segments(int64_t* n) {
  std::vector<ParamSegment> segments = {{0, 9000, true}, {9001, 4099, false}, {13100, 0, true},
                                        {13102, 8195, true}};
  int64_t at = 21300;
  for (int i = 0; i < 120; ++i) {
    segments.push_back({at, 3 + i % 7, i % 3 != 0});
    at += 3 + i % 7 + i % 2;
  }
  *n = at + 5;
  return segments;
}

OptimizerHyper one_bit_hyper(double grad_scale) {
  OptimizerHyper h;
  h.lr = 2e-3;
  h.beta1 = 0.9;
  h.eps = 1e-8;
  h.weight_decay = 0.1;
  h.step = 7;
  h.grad_scale = grad_scale;
  return h;
}

// kMomentum: m = b1 m + (1 - b1) (g grad_scale), the parameters left as they were (a parameter
// copy receives them unchanged); f32 and 16-bit gradients, with and without the copy.
TEST_F(CudaOneBit, MomentumMatchesTheCpuBitForBit) {
  int64_t n = 0;
  const std::vector<ParamSegment> segments = uneven_segments(&n);
  for (DType grads_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (bool with_copy : {false, true}) {
      // 16-bit gradients come with a copy of their own dtype; f32 ones here with a bf16 copy.
      const DType copy_dtype = grads_dtype == DType::kF32 ? DType::kBF16 : grads_dtype;
      std::vector<double> res[2];
      std::vector<uint8_t> copies[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor p = upload(*be, random_values(n, 71), {n}, DType::kF32);
        const Tensor g = upload(*be, edgy_values(n, 72, -2.0f, 2.0f), {n}, grads_dtype);
        std::vector<Tensor> state = {upload(*be, random_values(n, 73, -0.01f, 0.01f), {n},
                                            DType::kF32)};
        Tensor copy = be->empty({n}, copy_dtype, MemoryCategory::kOther);
        be->copy(copy, p);
        for (double grad_scale : {1.0, 0.37}) {
          if (with_copy) {
            be->optimizer_update_with_copy(OptimizerKind::kMomentum, p, g, state, segments,
                                           one_bit_hyper(grad_scale), copy);
          } else {
            be->optimizer_update(OptimizerKind::kMomentum, p, g, state, segments,
                                 one_bit_hyper(grad_scale));
          }
        }
        copies[slot] = download_bytes(*be, copy);
        res[slot] = download_update(*be, p, state);
        ++slot;
      }
      const std::string what =
          std::string(dtype_name(grads_dtype)) + " grads, copy " + std::to_string(with_copy);
      EXPECT_EQ(res[0], res[1]) << what;
      EXPECT_EQ(copies[0], copies[1]) << what;
    }
  }
}

// kFrozenVarianceAdam: p -= float(lr wd) p; p -= lr m / (sqrt(v) + eps), v left, m set to 0
// where v is exactly 0 (every fifth element here: the momentum mask). Its gradients are NaN: an
// update that read them would show it.
TEST_F(CudaOneBit, FrozenVarianceAdamMatchesTheCpuBitForBitWithoutReadingGradients) {
  int64_t n = 0;
  const std::vector<ParamSegment> segments = uneven_segments(&n);
  const std::vector<float> nan_grads(static_cast<size_t>(n),
                                     std::numeric_limits<float>::quiet_NaN());
  std::vector<float> variance = random_values(n, 83, 0.0f, 0.01f);
  for (size_t i = 0; i < variance.size(); i += 5) variance[i] = 0.0f;
  for (DType grads_dtype : {DType::kF32, DType::kBF16}) {
    for (bool with_copy : {false, true}) {
      const DType copy_dtype = grads_dtype == DType::kF32 ? DType::kF32 : grads_dtype;
      std::vector<double> res[2];
      std::vector<uint8_t> copies[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor p = upload(*be, random_values(n, 81), {n}, DType::kF32);
        const Tensor g = upload(*be, nan_grads, {n}, grads_dtype);
        std::vector<Tensor> state = {
            upload(*be, edgy_values(n, 82, -0.01f, 0.01f), {n}, DType::kF32),
            upload(*be, variance, {n}, DType::kF32)};
        Tensor copy = be->empty({n}, copy_dtype, MemoryCategory::kOther);
        be->copy(copy, p);
        for (int step = 0; step < 2; ++step) {
          if (with_copy) {
            be->optimizer_update_with_copy(OptimizerKind::kFrozenVarianceAdam, p, g, state,
                                           segments, one_bit_hyper(1.0), copy);
          } else {
            be->optimizer_update(OptimizerKind::kFrozenVarianceAdam, p, g, state, segments,
                                 one_bit_hyper(1.0));
          }
        }
        copies[slot] = download_bytes(*be, copy);
        res[slot] = download_update(*be, p, state);
        ++slot;
      }
      const std::string what =
          std::string(dtype_name(grads_dtype)) + " grads, copy " + std::to_string(with_copy);
      EXPECT_EQ(res[0], res[1]) << what;
      EXPECT_EQ(copies[0], copies[1]) << what;
    }
  }
}

TEST_F(CudaOneBit, OptimizerStateCountsOfTheOneBitKinds) {
  Tensor p = gpu().zeros({8}, DType::kF32, MemoryCategory::kOther);
  Tensor g = gpu().zeros({8}, DType::kF32, MemoryCategory::kOther);
  const ParamSegment segment{0, 8, true};
  std::vector<Tensor> one = {gpu().zeros({8}, DType::kF32, MemoryCategory::kOther)};
  std::vector<Tensor> two = {gpu().zeros({8}, DType::kF32, MemoryCategory::kOther),
                             gpu().zeros({8}, DType::kF32, MemoryCategory::kOther)};
  EXPECT_THROW(gpu().optimizer_update(OptimizerKind::kFrozenVarianceAdam, p, g, one,
                                      {&segment, 1}, OptimizerHyper{}),
               ShapeError);
  EXPECT_THROW(gpu().optimizer_update(OptimizerKind::kMomentum, p, g, two, {&segment, 1},
                                      OptimizerHyper{}),
               ShapeError);
  EXPECT_NO_THROW(gpu().optimizer_update(OptimizerKind::kMomentum, p, g, one, {&segment, 1},
                                         OptimizerHyper{}));
  EXPECT_NO_THROW(gpu().optimizer_update(OptimizerKind::kFrozenVarianceAdam, p, g, two,
                                         {&segment, 1}, OptimizerHyper{}));
}

}  // namespace onebit_cuda_test
}  // namespace zero::backend::cuda_test
