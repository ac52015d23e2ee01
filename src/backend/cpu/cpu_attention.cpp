// CPU causal self-attention, flash-style (see Backend::attention_forward/backward).
//
// Forward: scores are formed for a 128-row query tile against one 64-key tile at a time (a
// GEMM), folded into a running max / sum per row (online softmax) and multiplied into the
// output accumulator (a second GEMM). Only out and the row logsumexp are stored. A task is one
// (batch, kv head) when there are enough of them for the threads, else one (batch, head, query
// tile).
//
// Backward recomputes P = exp(scale q k^T - lse) tile by tile and dS = P * (dO v^T - delta),
// delta_i = dO_i . out_i. dK and dV of a key tile sum over every query head of its kv group, so a
// task owns one (batch, kv head): it walks the key tiles and, for each, every query head and
// query tile, adding P^T dO to dV, dS^T Q to dK and dS K straight into those heads' dQ rows,
// which no other task touches. That is 5 tile GEMMs per (query tile, key tile) pair. When there
// are too few (batch, kv head) tasks to keep the threads busy, the work is split in two passes
// instead (dK/dV per key tile, then dQ per query tile; 7 GEMMs per pair, all threads busy).
//
// Scores are computed as q @ (k tile transposed) so every tile product is a plain NN or TN GEMM
// (see transpose_rows). GPT-2 124M shapes (B=4, T=1024, H=12, D=64, f32) run forward+backward
// at roughly 75-80% of the machine's large-sgemm rate (flops counted for the causal half).
//
// Determinism: every output element is summed in an order fixed by the tiling alone (key tiles
// ascending for out and dQ; heads of the group, then query tiles ascending, for dK/dV) and all
// schedules issue the same GEMM calls for it, so results are bitwise identical for any thread
// count.
#include "backend/cpu/cpu_attention.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention_tiles.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

using namespace attention_detail;

struct Dims {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t group() const { return heads / kv_heads; }
  bool empty() const { return batch == 0 || seq == 0; }
};

std::string describe_or_undefined(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

// A [B, T, heads, D] CPU view whose rows of D elements are contiguous and do not overlap along
// T (the tile GEMMs read rows at the T stride).
void require_head_layout(const Tensor& t, const std::string& op, const char* name) {
  const bool layout_ok = t.defined() && t.device().is_cpu() && t.dim() == 4 &&
                         (t.stride(3) == 1 || t.size(3) <= 1) &&
                         (t.size(1) <= 1 || t.stride(1) >= t.size(3));
  if (!layout_ok) {
    throw ShapeError(op + ": " + name +
                     " must be a CPU [B, T, heads, D] tensor or view with contiguous D, got " +
                     describe_or_undefined(t));
  }
}

void require_dtype_of(const Tensor& t, DType dtype, const std::string& op, const char* name) {
  if (t.dtype() != dtype) {
    throw ShapeError(op + ": " + name + " is " + dtype_name(t.dtype()) + " but q is " +
                     dtype_name(dtype) + "; all attention tensors share q's dtype");
  }
}

Dims check_forward_args(const std::string& op, const Tensor& out, const Tensor& lse,
                        const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  require_head_layout(q, op, "q");
  require_head_layout(k, op, "k");
  require_head_layout(v, op, "v");
  require_head_layout(out, op, "out");
  Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.size(0) != d.batch || k.size(1) != d.seq || k.size(3) != d.head_dim) {
    throw ShapeError(op + ": k " + shape_to_string(k.shape()) + " does not fit q " +
                     shape_to_string(q.shape()) + "; k must be [B, T, KVH, D] with q's B, T, D");
  }
  if (v.shape() != k.shape()) {
    throw ShapeError(op + ": v " + shape_to_string(v.shape()) + " must have k's shape " +
                     shape_to_string(k.shape()));
  }
  if (out.shape() != q.shape()) {
    throw ShapeError(op + ": out " + shape_to_string(out.shape()) + " must have q's shape " +
                     shape_to_string(q.shape()));
  }
  if (d.kv_heads <= 0 || d.heads <= 0 || d.heads % d.kv_heads != 0) {
    throw ShapeError(op + ": q has " + std::to_string(d.heads) + " heads, which is not a " +
                     "multiple of k/v's " + std::to_string(d.kv_heads) +
                     " kv heads; use H = KVH (MHA), H = n * KVH (GQA) or KVH = 1 (MQA)");
  }
  if (d.head_dim <= 0) throw ShapeError(op + ": head dimension D of q must be positive");
  require_dtype_of(k, q.dtype(), op, "k");
  require_dtype_of(v, q.dtype(), op, "v");
  require_dtype_of(out, q.dtype(), op, "out");
  const DType stats = stats_dtype(q.dtype());
  const Shape lse_shape{d.batch, d.heads, d.seq};
  if (!lse.defined() || !lse.device().is_cpu() || lse.shape() != lse_shape ||
      lse.dtype() != stats || !lse.is_contiguous()) {
    throw ShapeError(op + ": lse must be a contiguous CPU " + dtype_name(stats) +
                     shape_to_string(lse_shape) + " tensor ([B, H, T]), got " +
                     describe_or_undefined(lse));
  }
  if (window < 0) {
    throw ShapeError(op + ": window " + std::to_string(window) +
                     " is negative; use 0 for full causal attention or w > 0 for a sliding window");
  }
  return d;
}

// Everything a tile task reads or writes, resolved once.
template <typename T>
struct Problem {
  Dims d;
  T scale;
  int64_t window;
  HeadView<T> q, k, v, out, dout, dq, dk, dv;
  T* lse;           // [B, H, T]
  const T* delta;   // [B, H, T], backward only
  const T* row_lse(int64_t b, int64_t h, int64_t i) const {
    return lse + (b * d.heads + h) * d.seq + i;
  }
  const T* row_delta(int64_t b, int64_t h, int64_t i) const {
    return delta + (b * d.heads + h) * d.seq + i;
  }
};

// Query tiles that can see key tile [k0, k1) lie below this row bound.
inline int64_t query_end_for_keys(const Dims& d, int64_t k1, int64_t window) {
  return window > 0 ? std::min(d.seq, k1 - 1 + window) : d.seq;
}

// Whether one task per (batch, kv head) keeps the threads busy enough to beat finer tasks that
// redo some work: the two-pass backward does 7/5 of the one-pass GEMM work; the forward with
// per-query-tile tasks transposes each key tile once per query tile instead of once per head.
bool one_pass_pays(int64_t tasks, int64_t threads) {
  if (threads <= 1) return true;
  const int64_t rounds = ceil_div(tasks, threads);
  return static_cast<double>(tasks) / static_cast<double>(rounds * threads) >= 5.0 / 7.0;
}

// Whether the problem is big enough to pay for waking the thread team. Tiny problems (unit
// tests, finite differences) run on the calling thread: results do not depend on it, and an
// oversubscribed machine makes every parallel region cost a scheduler time slice.
bool worth_threads(const Dims& d) {
  const double causal_flops = 2.0 * static_cast<double>(d.batch * d.heads * d.head_dim) *
                              static_cast<double>(d.seq) * static_cast<double>(d.seq);
  return causal_flops >= 4.0e6;
}

int64_t team_size(const Dims& d) { return worth_threads(d) ? omp_get_max_threads() : 1; }

// ---- forward ------------------------------------------------------------------------------

// Keys of one kv head transposed tile by tile: key tile j occupies [D, kKeyTile] (leading
// dimension kKeyTile) starting at element j * D * kKeyTile. Per-tile and per-head transposes
// share this layout, so the score GEMMs see identical operands either way.
template <typename T>
T* transposed_key_tile(T* base, int64_t k0, int64_t head_dim) {
  return base + k0 / kKeyTile * head_dim * kKeyTile;
}

template <typename T>
void transpose_keys(const Problem<T>& pr, int64_t b, int64_t g, int64_t k0, int64_t k1, T* dst) {
  const int64_t D = pr.d.head_dim;
  for (int64_t j = k0; j < k1; j += kKeyTile) {
    transpose_rows(transposed_key_tile(dst, j - k0, D), kKeyTile, pr.k, b, j,
                   std::min(kKeyTile, pr.d.seq - j), g, D);
  }
}

template <typename T>
struct ForwardScratch {
  std::vector<T> kt, scores, acc, row_max, row_sum;
  // whole_head: room for every key tile of a head (one task per kv head); else one key tile.
  ForwardScratch(int64_t seq, int64_t head_dim, bool whole_head)
      : kt(static_cast<size_t>(head_dim * kKeyTile * (whole_head ? ceil_div(seq, kKeyTile) : 1))),
        scores(static_cast<size_t>(kQueryTile * kKeyTile)),
        acc(static_cast<size_t>(kQueryTile * head_dim)),
        row_max(kQueryTile),
        row_sum(kQueryTile) {}
};

// max(m, s[lo..hi)).
template <typename T>
inline T row_max_update(const T* s, int64_t lo, int64_t hi, T m) {
#pragma omp simd reduction(max : m)
  for (int64_t c = lo; c < hi; ++c) m = s[c] > m ? s[c] : m;
  return m;
}

// s[c] = exp(s[c] - m) on [lo, hi), 0 on the rest of [0, cols); returns the sum.
template <typename T>
inline T exp_row(T* s, int64_t lo, int64_t hi, int64_t cols, T m) {
  T sum = 0;
  std::fill(s, s + lo, T(0));
#pragma omp simd reduction(+ : sum)
  for (int64_t c = lo; c < hi; ++c) {
    const T e = tile_exp(s[c] - m);
    s[c] = e;
    sum += e;
  }
  std::fill(s + hi, s + cols, T(0));
  return sum;
}

// One query tile of head h. keys_transposed: the head's keys laid out by transpose_keys() from
// key 0, or null to transpose each key tile here into s.kt.
template <typename T>
void forward_query_tile(const Problem<T>& pr, int64_t b, int64_t h, int64_t q0,
                        const T* keys_transposed, ForwardScratch<T>& s) {
  const Dims& d = pr.d;
  const int64_t D = d.head_dim, g = h / d.group();
  const int64_t q1 = std::min(q0 + kQueryTile, d.seq);
  std::fill_n(s.acc.data(), (q1 - q0) * D, T(0));
  std::fill_n(s.row_max.data(), q1 - q0, -std::numeric_limits<T>::infinity());
  std::fill_n(s.row_sum.data(), q1 - q0, T(0));
  for (int64_t k0 = first_key(q0, pr.window) / kKeyTile * kKeyTile; k0 < q1; k0 += kKeyTile) {
    const PairBlock blk = pair_block(q0, q1, k0, std::min(k0 + kKeyTile, d.seq), pr.window);
    if (blk.empty()) continue;
    T* sc = s.scores.data();
    const T* kt = keys_transposed;
    if (kt == nullptr) {
      transpose_keys(pr, b, g, k0, k0 + 1, s.kt.data());
      kt = s.kt.data();
    } else {
      kt = transposed_key_tile(kt, k0, D);
    }
    gemm(false, false, blk.rows(), blk.cols(), D, pr.scale, pr.q.row(b, blk.r0, h),
         pr.q.seq_stride, kt + (blk.c0 - k0), kKeyTile, T(0), sc, kKeyTile);
    for (int64_t i = blk.r0; i < blk.r1; ++i) {
      T* srow = sc + (i - blk.r0) * kKeyTile;
      const int64_t r = i - q0;
      int64_t lo = 0, hi = 0;
      visible_columns(blk, i, pr.window, &lo, &hi);
      // Online softmax: raise the running max, rescale what was accumulated under the old one.
      // Most rows see a whole key tile: that case gets loops of constant length.
      const T old_max = s.row_max[r];
      const bool full = lo == 0 && hi == kKeyTile;
      const T m = full ? row_max_update(srow, 0, kKeyTile, old_max)
                       : row_max_update(srow, lo, hi, old_max);
      const T sum = full ? exp_row(srow, 0, kKeyTile, kKeyTile, m)
                         : exp_row(srow, lo, hi, blk.cols(), m);
      const T alpha = m == old_max ? T(1) : tile_exp(old_max - m);
      s.row_max[r] = m;
      s.row_sum[r] = s.row_sum[r] * alpha + sum;
      if (alpha != T(1)) {
        T* a = s.acc.data() + r * D;
#pragma omp simd
        for (int64_t x = 0; x < D; ++x) a[x] *= alpha;
      }
    }
    gemm(false, false, blk.rows(), D, blk.cols(), T(1), sc, kKeyTile, pr.v.row(b, blk.c0, g),
         pr.v.seq_stride, T(1), s.acc.data() + (blk.r0 - q0) * D, D);
  }
  for (int64_t i = q0; i < q1; ++i) {
    const int64_t r = i - q0;
    const T inv = T(1) / s.row_sum[r];
    const T* a = s.acc.data() + r * D;
    T* o = pr.out.row(b, i, h);
#pragma omp simd
    for (int64_t x = 0; x < D; ++x) o[x] = a[x] * inv;
    pr.lse[(b * d.heads + h) * d.seq + i] = s.row_max[r] + std::log(s.row_sum[r]);
  }
}

template <typename T>
void forward_impl(const Problem<T>& pr) {
  const Dims& d = pr.d;
  const int64_t tiles = ceil_div(d.seq, kQueryTile);
  const int64_t groups = d.batch * d.kv_heads;
  const bool per_group = one_pass_pays(groups, team_size(d));
#pragma omp parallel if (worth_threads(d))
  {
    ForwardScratch<T> scratch(d.seq, d.head_dim, per_group);
    if (per_group) {
      // One task per (batch, kv head): its keys are transposed once for all its query tiles.
#pragma omp for schedule(dynamic, 1)
      for (int64_t w = 0; w < groups; ++w) {
        const int64_t b = w / d.kv_heads, g = w % d.kv_heads;
        transpose_keys(pr, b, g, 0, d.seq, scratch.kt.data());
        for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
          for (int64_t q0 = 0; q0 < d.seq; q0 += kQueryTile) {
            forward_query_tile(pr, b, h, q0, scratch.kt.data(), scratch);
          }
        }
      }
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t w = 0; w < d.batch * d.heads * tiles; ++w) {
        // The query tiles of one head run back to back so its keys and values stay in L2;
        // within a head the late tiles, which see the most keys, go first: a short tail.
        const int64_t bh = w / tiles, qt = tiles - 1 - w % tiles;
        forward_query_tile(pr, bh / d.heads, bh % d.heads, qt * kQueryTile,
                           static_cast<const T*>(nullptr), scratch);
      }
    }
  }
}

// ---- backward -----------------------------------------------------------------------------

// delta[b, h, i] = dout_i . out_i: the row term of the softmax backward.
template <typename T>
std::vector<T> row_deltas(const Dims& d, const HeadView<T>& dout, const HeadView<T>& out) {
  std::vector<T> delta(static_cast<size_t>(d.batch * d.heads * d.seq));
  const int64_t rows = d.batch * d.heads * d.seq;
#pragma omp parallel for schedule(static) if (worth_threads(d))
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t i = n % d.seq, h = (n / d.seq) % d.heads, b = n / (d.seq * d.heads);
    const T* g = dout.row(b, i, h);
    const T* o = out.row(b, i, h);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t x = 0; x < d.head_dim; ++x) sum += g[x] * o[x];
    delta[static_cast<size_t>(n)] = sum;
  }
  return delta;
}

template <typename T>
struct BackwardScratch {
  std::vector<T> kt, vt, p, ds, dk_acc, dv_acc;
  explicit BackwardScratch(int64_t head_dim)
      : kt(static_cast<size_t>(head_dim * kKeyTile)),
        vt(static_cast<size_t>(head_dim * kKeyTile)),
        p(static_cast<size_t>(kQueryTile * kKeyTile)),
        ds(static_cast<size_t>(kQueryTile * kKeyTile)),
        dk_acc(static_cast<size_t>(kKeyTile * head_dim)),
        dv_acc(static_cast<size_t>(kKeyTile * head_dim)) {}
};

// Transposes key tile [k0, k0 + kKeyTile) of kv head g into s.kt and s.vt ([D, kKeyTile]).
template <typename T>
void transpose_key_tile(const Problem<T>& pr, int64_t b, int64_t g, int64_t k0,
                        BackwardScratch<T>& s) {
  const int64_t cols = std::min(kKeyTile, pr.d.seq - k0);
  transpose_rows(s.kt.data(), kKeyTile, pr.k, b, k0, cols, g, pr.d.head_dim);
  transpose_rows(s.vt.data(), kKeyTile, pr.v, b, k0, cols, g, pr.d.head_dim);
}

// For one pair block of head h: s.p = P (zero where masked) and s.ds = dS, both [rows, cols]
// with leading dimension kKeyTile. s.kt and s.vt hold the key tile starting at k0, transposed.
template <typename T>
void pair_gradients(const Problem<T>& pr, int64_t b, int64_t h, int64_t k0, const PairBlock& blk,
                    BackwardScratch<T>& s) {
  const int64_t D = pr.d.head_dim;
  T* p = s.p.data();
  T* ds = s.ds.data();
  gemm(false, false, blk.rows(), blk.cols(), D, pr.scale, pr.q.row(b, blk.r0, h),
       pr.q.seq_stride, s.kt.data() + (blk.c0 - k0), kKeyTile, T(0), p, kKeyTile);
  gemm(false, false, blk.rows(), blk.cols(), D, T(1), pr.dout.row(b, blk.r0, h),
       pr.dout.seq_stride, s.vt.data() + (blk.c0 - k0), kKeyTile, T(0), ds, kKeyTile);
  const T* lse = pr.row_lse(b, h, blk.r0);
  const T* delta = pr.row_delta(b, h, blk.r0);
  for (int64_t i = blk.r0; i < blk.r1; ++i) {
    const int64_t r = i - blk.r0;
    T* prow = p + r * kKeyTile;
    T* dsrow = ds + r * kKeyTile;
    int64_t lo = 0, hi = 0;
    visible_columns(blk, i, pr.window, &lo, &hi);
    const T row_lse = lse[r], row_delta = delta[r];
    std::fill(prow, prow + lo, T(0));
    std::fill(dsrow, dsrow + lo, T(0));
#pragma omp simd
    for (int64_t c = lo; c < hi; ++c) {
      const T pc = tile_exp(prow[c] - row_lse);
      prow[c] = pc;
      dsrow[c] = pc * (dsrow[c] - row_delta);
    }
    std::fill(prow + hi, prow + blk.cols(), T(0));
    std::fill(dsrow + hi, dsrow + blk.cols(), T(0));
  }
}

// dK and dV of key tile [k0, k0 + kKeyTile) of kv head g, summed over the group's query heads
// and every query tile that sees the keys. With add_dq, also adds each pair's dS K into dq (the
// caller owns those dq rows and has zeroed them).
template <typename T>
void key_tile_backward(const Problem<T>& pr, int64_t b, int64_t g, int64_t k0, bool add_dq,
                       BackwardScratch<T>& s) {
  const Dims& d = pr.d;
  const int64_t D = d.head_dim;
  const int64_t k1 = std::min(k0 + kKeyTile, d.seq);
  std::fill_n(s.dk_acc.data(), (k1 - k0) * D, T(0));
  std::fill_n(s.dv_acc.data(), (k1 - k0) * D, T(0));
  const int64_t q_end = query_end_for_keys(d, k1, pr.window);
  transpose_key_tile(pr, b, g, k0, s);
  for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
    for (int64_t q0 = k0 / kQueryTile * kQueryTile; q0 < q_end; q0 += kQueryTile) {
      const PairBlock blk = pair_block(q0, std::min(q0 + kQueryTile, d.seq), k0, k1, pr.window);
      if (blk.empty()) continue;
      pair_gradients(pr, b, h, k0, blk, s);
      T* dv_rows = s.dv_acc.data() + (blk.c0 - k0) * D;
      T* dk_rows = s.dk_acc.data() + (blk.c0 - k0) * D;
      gemm(true, false, blk.cols(), D, blk.rows(), T(1), s.p.data(), kKeyTile,
           pr.dout.row(b, blk.r0, h), pr.dout.seq_stride, T(1), dv_rows, D);
      gemm(true, false, blk.cols(), D, blk.rows(), pr.scale, s.ds.data(), kKeyTile,
           pr.q.row(b, blk.r0, h), pr.q.seq_stride, T(1), dk_rows, D);
      if (add_dq) {
        gemm(false, false, blk.rows(), D, blk.cols(), pr.scale, s.ds.data(), kKeyTile,
             pr.k.row(b, blk.c0, g), pr.k.seq_stride, T(1), pr.dq.row(b, blk.r0, h),
             pr.dq.seq_stride);
      }
    }
  }
  for (int64_t j = k0; j < k1; ++j) {
    std::copy_n(s.dk_acc.data() + (j - k0) * D, D, pr.dk.row(b, j, g));
    std::copy_n(s.dv_acc.data() + (j - k0) * D, D, pr.dv.row(b, j, g));
  }
}

template <typename T>
void zero_dq_rows(const Problem<T>& pr, int64_t b, int64_t h, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) std::fill_n(pr.dq.row(b, i, h), pr.d.head_dim, T(0));
}

// dQ of query tile [q0, q0 + kQueryTile) of head h, key tiles ascending (the order the one-pass
// schedule uses too).
template <typename T>
void query_tile_dq(const Problem<T>& pr, int64_t b, int64_t h, int64_t q0, BackwardScratch<T>& s) {
  const Dims& d = pr.d;
  const int64_t g = h / d.group();
  const int64_t q1 = std::min(q0 + kQueryTile, d.seq);
  zero_dq_rows(pr, b, h, q0, q1);
  for (int64_t k0 = first_key(q0, pr.window) / kKeyTile * kKeyTile; k0 < q1; k0 += kKeyTile) {
    const PairBlock blk = pair_block(q0, q1, k0, std::min(k0 + kKeyTile, d.seq), pr.window);
    if (blk.empty()) continue;
    transpose_key_tile(pr, b, g, k0, s);
    pair_gradients(pr, b, h, k0, blk, s);
    gemm(false, false, blk.rows(), d.head_dim, blk.cols(), pr.scale, s.ds.data(), kKeyTile,
         pr.k.row(b, blk.c0, g), pr.k.seq_stride, T(1), pr.dq.row(b, blk.r0, h),
         pr.dq.seq_stride);
  }
}

template <typename T>
void backward_impl(const Problem<T>& pr) {
  const Dims& d = pr.d;
  const int64_t key_tiles = ceil_div(d.seq, kKeyTile);
  const int64_t groups = d.batch * d.kv_heads;
  if (one_pass_pays(groups, team_size(d))) {
#pragma omp parallel if (worth_threads(d))
    {
      BackwardScratch<T> scratch(d.head_dim);
#pragma omp for schedule(dynamic, 1)
      for (int64_t w = 0; w < groups; ++w) {
        const int64_t b = w / d.kv_heads, g = w % d.kv_heads;
        for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
          zero_dq_rows(pr, b, h, 0, d.seq);
        }
        for (int64_t kt = 0; kt < key_tiles; ++kt) {
          key_tile_backward(pr, b, g, kt * kKeyTile, /*add_dq=*/true, scratch);
        }
      }
    }
    return;
  }
  const int64_t query_tiles = ceil_div(d.seq, kQueryTile);
#pragma omp parallel if (worth_threads(d))
  {
    BackwardScratch<T> scratch(d.head_dim);
    // Early key tiles are seen by the most query tiles: hand them out first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < groups * key_tiles; ++w) {
      const int64_t kt = w / groups, bg = w % groups;
      key_tile_backward(pr, bg / d.kv_heads, bg % d.kv_heads, kt * kKeyTile, /*add_dq=*/false,
                        scratch);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < d.batch * d.heads * query_tiles; ++w) {
      const int64_t qt = query_tiles - 1 - w / (d.batch * d.heads);
      const int64_t bh = w % (d.batch * d.heads);
      query_tile_dq(pr, bh / d.heads, bh % d.heads, qt * kQueryTile, scratch);
    }
  }
}

}  // namespace

void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale, int64_t window) {
  const Dims d = check_forward_args("attention_forward", out, lse, q, k, v, window);
  if (d.empty()) return;
  dispatch_floating(q.dtype(), "attention_forward", [&]<typename T>() {
    Problem<T> pr{};
    pr.d = d;
    pr.scale = static_cast<T>(scale);
    pr.window = window;
    pr.q = head_view<T>(q);
    pr.k = head_view<T>(k);
    pr.v = head_view<T>(v);
    pr.out = head_view<T>(out);
    pr.lse = lse.data<T>();
    forward_impl(pr);
  });
}

void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        double scale, int64_t window) {
  const std::string op = "attention_backward";
  const Dims d = check_forward_args(op, out, lse, q, k, v, window);
  const std::pair<const Tensor*, const char*> grads[] = {
      {&dout, "dout"}, {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  for (const auto& [t, name] : grads) {
    require_head_layout(*t, op, name);
    require_dtype_of(*t, q.dtype(), op, name);
  }
  if (dout.shape() != q.shape() || dq.shape() != q.shape()) {
    throw ShapeError(op + ": dout " + shape_to_string(dout.shape()) + " and dq " +
                     shape_to_string(dq.shape()) + " must have q's shape " +
                     shape_to_string(q.shape()));
  }
  if (dk.shape() != k.shape() || dv.shape() != v.shape()) {
    throw ShapeError(op + ": dk " + shape_to_string(dk.shape()) + " and dv " +
                     shape_to_string(dv.shape()) + " must have k's shape " +
                     shape_to_string(k.shape()));
  }
  if (d.empty()) return;
  dispatch_floating(q.dtype(), op.c_str(), [&]<typename T>() {
    const std::vector<T> delta = row_deltas<T>(d, head_view<T>(dout), head_view<T>(out));
    Problem<T> pr{};
    pr.d = d;
    pr.scale = static_cast<T>(scale);
    pr.window = window;
    pr.q = head_view<T>(q);
    pr.k = head_view<T>(k);
    pr.v = head_view<T>(v);
    pr.out = head_view<T>(out);
    pr.dout = head_view<T>(dout);
    pr.dq = head_view<T>(dq);
    pr.dk = head_view<T>(dk);
    pr.dv = head_view<T>(dv);
    pr.lse = lse.data<T>();
    pr.delta = delta.data();
    backward_impl(pr);
  });
}

}  // namespace zero::backend::cpu
