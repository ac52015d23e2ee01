// mpi-ranks: 2 3 4
// MpiComm across processes: closed-form collectives (rank r contributes r), reductions that are
// bit-identical to a rank-order fold, 16-bit sums, asynchronous work that overlaps computation,
// stored errors, traffic counters, sub-groups and the Mesh.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "comm/mesh.h"
#include "comm/world.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::comm {
namespace {

Tensor filled(int64_t n, DType dtype, double value) {
  Tensor t = Tensor::zeros_host({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) t.data<float>()[i] = static_cast<float>(value);
    if (dtype == DType::kF64) t.data<double>()[i] = value;
  }
  return t;
}

// A value per (rank, element) chosen so that the order of f32 additions matters: small odd
// mantissas at exponents 2^-12..2^12, built exactly (ldexp), so no compiler contraction can
// change them between the ranks and the reference fold.
float contribution(int rank, int64_t i) {
  const double mantissa = static_cast<double>((rank * 37 + i * 11) % 17 + 1);
  const int exponent = static_cast<int>(((rank * 7 + i) % 9 - 4) * 3);
  return static_cast<float>(std::ldexp(rank % 2 ? -mantissa : mantissa, exponent));
}

TEST(MpiComm, ClosedFormCollectives) {
  Comm& w = world();
  const int n = w.world_size(), r = w.rank();
  Tensor t = filled(7, DType::kF64, r);
  w.all_reduce(t, ReduceOp::kSum);
  EXPECT_EQ(t.data<double>()[6], n * (n - 1) / 2.0);
  Tensor m = filled(3, DType::kF64, r);
  w.all_reduce(m, ReduceOp::kMax);
  EXPECT_EQ(m.data<double>()[0], n - 1);

  // reduce_scatter: chunk c of rank r's input is r + c; rank r receives sum_k (k + r).
  Tensor in = Tensor::zeros_host({2 * n}, DType::kF64);
  for (int c = 0; c < n; ++c) in.data<double>()[2 * c] = in.data<double>()[2 * c + 1] = r + c;
  Tensor out = Tensor::zeros_host({2}, DType::kF64);
  w.reduce_scatter(in, out, ReduceOp::kSum);
  EXPECT_EQ(out.data<double>()[1], n * (n - 1) / 2.0 + n * r);

  Tensor mine = filled(3, DType::kF32, r);
  Tensor all = Tensor::zeros_host({3 * n}, DType::kF32);
  w.all_gather(mine, all);
  for (int k = 0; k < n; ++k) EXPECT_EQ(all.data<float>()[3 * k + 2], static_cast<float>(k));

  // all_to_all: chunk j of rank i (value 10 i + j) lands in chunk i of rank j.
  Tensor send = Tensor::zeros_host({n}, DType::kF32), recv = Tensor::zeros_host({n}, DType::kF32);
  for (int j = 0; j < n; ++j) send.data<float>()[j] = static_cast<float>(10 * r + j);
  w.all_to_all(send, recv);
  for (int i = 0; i < n; ++i) EXPECT_EQ(recv.data<float>()[i], static_cast<float>(10 * i + r));

  Tensor b = filled(4, DType::kF32, r == 1 ? 42.0 : 0.0);
  w.broadcast(b, 1);
  EXPECT_EQ(b.data<float>()[3], 42.0f);

  // A ring of point-to-point messages.
  Tensor token = filled(2, DType::kF64, r);
  Tensor got = Tensor::zeros_host({2}, DType::kF64);
  if (r % 2 == 0) {
    w.send(token, (r + 1) % n, 5);
    w.recv(got, (r + n - 1) % n, 5);
  } else {
    w.recv(got, (r + n - 1) % n, 5);
    w.send(token, (r + 1) % n, 5);
  }
  EXPECT_EQ(got.data<double>()[0], (r + n - 1) % n);
  w.barrier();
}

TEST(MpiComm, SumsAreARankOrderFoldOnEveryRank) {
  Comm& w = world();
  const int n = w.world_size();
  const int64_t len = 37;  // not divisible by 2, 3 or 4: padding inside all_reduce
  Tensor t = Tensor::zeros_host({len}, DType::kF32);
  for (int64_t i = 0; i < len; ++i) t.data<float>()[i] = contribution(w.rank(), i);
  w.all_reduce(t, ReduceOp::kSum);
  for (int64_t i = 0; i < len; ++i) {
    float fold = contribution(0, i);
    for (int k = 1; k < n; ++k) fold += contribution(k, i);
    ASSERT_EQ(t.data<float>()[i], fold) << "element " << i;
  }
  // bf16: accumulate in f32 in rank order, round once.
  Tensor h = Tensor::zeros_host({len}, DType::kBF16);
  for (int64_t i = 0; i < len; ++i) {
    static_cast<uint16_t*>(h.raw_data())[i] = float_to_bf16_bits(round_to_bf16(contribution(w.rank(), i)));
  }
  w.all_reduce(h, ReduceOp::kSum);
  for (int64_t i = 0; i < len; ++i) {
    float fold = round_to_bf16(contribution(0, i));
    for (int k = 1; k < n; ++k) fold += round_to_bf16(contribution(k, i));
    ASSERT_EQ(bf16_bits_to_float(static_cast<uint16_t*>(h.raw_data())[i]), round_to_bf16(fold));
  }
}

// fp16 sums at the edges: the f32 sum of the ranks' values is rounded to nearest-even once -
// a tie goes to the even neighbour, a sum past 65504 becomes Inf (the overflow a loss scaler
// sees), a sum of subnormals stays exact, NaN propagates.
TEST(MpiComm, Fp16SumsRoundOnceAtTheEdges) {
  Comm& w = world();
  const int n = w.world_size(), r = w.rank();
  // Element 0: rank 0 gives 2048, the others 1 each: 2048 + (n-1) - a tie when n-1 is odd.
  // Element 1: 33000 per rank (n >= 2: >= 66000) overflows. Element 2: 2^-24 per rank.
  // Element 3: NaN on the last rank only.
  const float values[] = {r == 0 ? 2048.0f : 1.0f, 33000.0f, 0x1p-24f,
                          r == n - 1 ? std::numeric_limits<float>::quiet_NaN() : 1.0f};
  Tensor h = Tensor::zeros_host({4}, DType::kF16);
  for (int i = 0; i < 4; ++i) static_cast<uint16_t*>(h.raw_data())[i] = float_to_f16_bits(values[i]);
  w.all_reduce(h, ReduceOp::kSum);
  const auto got = [&](int i) { return f16_bits_to_float(static_cast<uint16_t*>(h.raw_data())[i]); };
  const float exact = 2048.0f + static_cast<float>(n - 1);
  // Spacing at 2048 is 2: odd sums are ties and go to the neighbour divisible by 4.
  const float even = (n - 1) % 2 == 0 ? exact : (static_cast<int>(exact - 1) % 4 == 0 ? exact - 1 : exact + 1);
  EXPECT_EQ(got(0), even);
  EXPECT_EQ(got(1), std::numeric_limits<float>::infinity());
  EXPECT_EQ(got(2), std::ldexp(1.0f, -24) * static_cast<float>(n));
  EXPECT_TRUE(std::isnan(got(3)));
}

TEST(MpiComm, AsyncWorkOverlapsAndStoresErrors) {
  Comm& w = world();
  Tensor t = filled(1 << 16, DType::kF32, 1.0);
  auto work = w.all_reduce_async(t, ReduceOp::kSum);
  // The caller keeps computing while the communication thread works.
  double busy = 0;
  for (int i = 0; i < 100000; ++i) busy += std::sqrt(static_cast<double>(i));
  EXPECT_GT(busy, 0);
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(t.data<float>()[12345], static_cast<float>(w.world_size()));
  // A collective whose shapes are wrong fails on the caller with a clear error, nothing sent.
  Tensor bad_out = Tensor::zeros_host({3}, DType::kF32);
  EXPECT_THROW(w.reduce_scatter(t, bad_out, ReduceOp::kSum), Error);
  w.barrier();
}

TEST(MpiComm, TrafficCountersFollowTheFormulas) {
  Comm& w = world();
  const int n = w.world_size();
  w.reset_stats();
  const int64_t chunk = 101;
  Tensor in = filled(chunk * n, DType::kF32, 1.0), out = filled(chunk, DType::kF32, 0.0);
  w.reduce_scatter(in, out, ReduceOp::kSum);
  Tensor gathered = filled(chunk * n, DType::kF32, 0.0);
  w.all_gather_async(out, gathered)->wait();
  Tensor ar = filled(chunk, DType::kF32, 1.0);
  w.all_reduce(ar, ReduceOp::kSum);
  const int64_t bytes = 4 * chunk * n;
  EXPECT_EQ(w.stats().at(OpKind::kReduceScatter).traffic_bytes, bytes * (n - 1) / n);
  EXPECT_EQ(w.stats().at(OpKind::kAllGather).traffic_bytes, bytes * (n - 1) / n);
  EXPECT_EQ(w.stats().at(OpKind::kAllReduce).traffic_bytes, 2 * (4 * chunk) * (n - 1) / n);
  EXPECT_EQ(w.stats().at(OpKind::kAllGather).calls, 1);
  EXPECT_GT(w.stats().at(OpKind::kReduceScatter).seconds, 0.0);
}

TEST(MpiComm, SplitAndMesh) {
  Comm& w = world();
  const int n = w.world_size(), r = w.rank();
  auto halves = w.split(r % 2, r);
  EXPECT_EQ(halves->world_size(), (n + 1 - r % 2) / 2);
  EXPECT_DOUBLE_EQ(halves->all_reduce_scalar(1.0, ReduceOp::kSum), halves->world_size());
  if (n == 4) {
    Mesh mesh(w, MeshShape{1, 2, 1, 2});  // data 2 x tensor 2
    EXPECT_EQ(mesh.coordinate(MeshAxis::kTensor), r % 2);
    EXPECT_EQ(mesh.coordinate(MeshAxis::kData), r / 2);
    // The data group of rank r holds ranks with the same tensor coordinate: r%2 and r%2 + 2.
    EXPECT_DOUBLE_EQ(mesh.group(MeshAxis::kData).all_reduce_scalar(r, ReduceOp::kSum), 2 * (r % 2) + 2);
    EXPECT_DOUBLE_EQ(mesh.group(MeshAxis::kTensor).all_reduce_scalar(r, ReduceOp::kSum), 4 * (r / 2) + 1);
    EXPECT_EQ(mesh.group(MeshAxis::kPipeline).world_size(), 1);
  }
  Mesh flat(w, MeshShape{1, n, 1, 1});
  EXPECT_EQ(flat.group(MeshAxis::kData).world_size(), n);
  EXPECT_EQ(flat.group(MeshAxis::kData).rank(), r);
}

}  // namespace
}  // namespace zero::comm
