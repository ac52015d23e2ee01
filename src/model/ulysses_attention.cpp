#include "model/ulysses_attention.h"

#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/check.h"
#include "core/error.h"

namespace zero::model {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

// Uploads a host index table (one source row per destination row) as an i64 device tensor.
Tensor upload_indices(backend::Backend& backend, const std::vector<int64_t>& host) {
  Tensor ids = backend.empty({static_cast<int64_t>(host.size())}, DType::kI64, MemoryCategory::kOther);
  backend.copy_from_host(ids, host.data());
  return ids;
}

// dst rows = src rows picked by `ids` (both viewed as [rows, D]).
void gather_rows(backend::Backend& backend, const Tensor& dst, const Tensor& ids, const Tensor& src,
                 int64_t head_dim) {
  Tensor out = dst.reshape({dst.numel() / head_dim, head_dim});
  backend.embedding_forward(out, ids, src.reshape({src.numel() / head_dim, head_dim}), false);
}

// A [B, T, n, D] view of heads [first, first + n) inside a contiguous [B, T, width, D] buffer.
Tensor heads_view(const Tensor& full, int64_t first, int64_t n) {
  const int64_t b = full.size(0), t = full.size(1), width = full.size(2), d = full.size(3);
  return Tensor(full.storage(), full.dtype(), {b, t, n, d}, {t * width * d, width * d, d, 1},
                full.offset() + first * d);
}

}  // namespace

UlyssesHeads ulysses_heads(int64_t heads, int64_t kv_heads, int64_t ranks) {
  auto fail = [&](const std::string& why) {
    throw ConfigError("Ulysses sequence parallelism over sequence_parallel_size " +
                      std::to_string(ranks) + " ranks: " + why + " (num_attention_heads " +
                      std::to_string(heads) + ", num_key_value_heads " + std::to_string(kv_heads) +
                      "); choose a sequence_parallel_size that divides the heads");
  };
  if (ranks < 1) fail("the size must be >= 1");
  if (heads % ranks != 0) fail("the query heads do not divide by the sequence-parallel size");
  UlyssesHeads split;
  split.q_per_rank = heads / ranks;
  if (kv_heads % ranks == 0) {
    split.kv_per_rank = kv_heads / ranks;
  } else if (ranks % kv_heads == 0) {
    // DeepSpeed's answer to fewer KV heads than ranks: each rank gets one copy of a KV head.
    split.kv_per_rank = 1;
    split.kv_replicas = ranks / kv_heads;
  } else {
    fail("the key/value heads neither divide by the size nor divide it (for replication)");
  }
  return split;
}

void UlyssesAttention::build_indices(backend::Backend& backend) {
  const Shape& s = shape_;
  const int64_t p = s.ranks, b = s.batch, tl = s.local_len, t = p * tl;
  const int64_t w = s.width(), wl = s.local_width();
  const int64_t hl = s.split.q_per_rank, kvl = s.split.kv_per_rank, h = s.heads;
  // The first KV head rank j attends with (a replica's original head when replicated).
  auto kv_first = [&](int64_t j) { return s.split.kv_replicas > 1 ? j / s.split.kv_replicas : j * kvl; };
  // Source head (inside a token's [q | k | v] heads) of local head `c` of chunk j.
  auto source_head = [&](int64_t j, int64_t c) {
    if (c < hl) return j * hl + c;
    if (c < hl + kvl) return h + kv_first(j) + (c - hl);
    return h + s.kv_heads + kv_first(j) + (c - hl - kvl);
  };
  // Chunk-major layout of an all_to_all buffer: row ((j * B + b) * Tl + t) * width + c.
  auto chunk_row = [&](int64_t j, int64_t bi, int64_t ti, int64_t width, int64_t c) {
    return ((j * b + bi) * tl + ti) * width + c;
  };
  auto seq_unpack = [&](int64_t width) {  // [B, T, width] <- chunks of the sequence
    std::vector<int64_t> ids(static_cast<size_t>(b * t * width));
    for (int64_t i = 0; i < p; ++i)
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t ti = 0; ti < tl; ++ti)
          for (int64_t c = 0; c < width; ++c)
            ids[static_cast<size_t>((bi * t + i * tl + ti) * width + c)] = chunk_row(i, bi, ti, width, c);
    return ids;
  };
  auto seq_pack = [&](int64_t width) {  // chunks of the sequence <- [B, T, width]
    std::vector<int64_t> ids(static_cast<size_t>(b * t * width));
    for (int64_t j = 0; j < p; ++j)
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t ti = 0; ti < tl; ++ti)
          for (int64_t c = 0; c < width; ++c)
            ids[static_cast<size_t>(chunk_row(j, bi, ti, width, c))] = (bi * t + j * tl + ti) * width + c;
    return ids;
  };
  std::vector<int64_t> qkv_pack(static_cast<size_t>(p * b * tl * wl));
  std::vector<int64_t> out_unpack(static_cast<size_t>(b * tl * h));
  std::vector<int64_t> dout_pack(static_cast<size_t>(b * tl * h));
  for (int64_t j = 0; j < p; ++j) {
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t ti = 0; ti < tl; ++ti) {
        const int64_t token = bi * tl + ti;
        for (int64_t c = 0; c < wl; ++c) {
          qkv_pack[static_cast<size_t>(chunk_row(j, bi, ti, wl, c))] = token * w + source_head(j, c);
        }
        for (int64_t c = 0; c < hl; ++c) {
          out_unpack[static_cast<size_t>(token * h + j * hl + c)] = chunk_row(j, bi, ti, hl, c);
          dout_pack[static_cast<size_t>(chunk_row(j, bi, ti, hl, c))] = token * h + j * hl + c;
        }
      }
    }
  }
  indices_.qkv_pack = upload_indices(backend, qkv_pack);
  indices_.qkv_unpack = upload_indices(backend, seq_unpack(wl));
  indices_.qkv_repack = upload_indices(backend, seq_pack(wl));
  indices_.out_pack = upload_indices(backend, seq_pack(hl));
  indices_.out_unpack = upload_indices(backend, out_unpack);
  indices_.dout_pack = upload_indices(backend, dout_pack);
  indices_.dout_unpack = upload_indices(backend, seq_unpack(hl));
  have_indices_ = true;
}

void UlyssesAttention::forward(backend::Backend& backend, comm::Comm& group, Tensor& out,
                               const Tensor& qkv, int64_t batch, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, double scale, int64_t window, bool training) {
  Shape shape;
  shape.batch = batch;
  shape.ranks = group.world_size();
  shape.heads = heads;
  shape.kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.split = ulysses_heads(heads, kv_heads, shape.ranks);
  ZERO_CHECK(batch > 0 && qkv.is_contiguous() && out.is_contiguous() && qkv.dim() == 2 &&
                 qkv.size(0) % batch == 0 && qkv.size(1) == shape.width() * head_dim &&
                 out.numel() == qkv.size(0) * heads * head_dim,
             "UlyssesAttention::forward: qkv " << qkv.describe() << " and out " << out.describe()
                                               << " do not fit " << batch << " sequences");
  shape.local_len = qkv.size(0) / batch;
  if (!have_indices_ || !(shape == shape_)) {
    shape_ = shape;
    build_indices(backend);
  }
  scale_ = scale;
  window_ = window;
  const int64_t p = shape.ranks, t = p * shape.local_len, d = head_dim;
  const int64_t wl = shape.local_width(), hl = shape.split.q_per_rank, kvl = shape.split.kv_per_rank;
  const DType dt = qkv.dtype();

  // Scatter heads, gather the sequence.
  Tensor send = backend.empty({p * batch * shape.local_len * wl, d}, dt, kAct);
  gather_rows(backend, send, indices_.qkv_pack, qkv, d);
  Tensor recv = backend.empty(send.shape(), dt, kAct);
  group.all_to_all(send, recv);
  send = Tensor();
  Tensor qkv_full = backend.empty({batch, t, wl, d}, dt, kAct);
  gather_rows(backend, qkv_full, indices_.qkv_unpack, recv, d);
  recv = Tensor();

  Tensor out_full = backend.empty({batch, t, hl, d}, dt, kAct);
  Tensor lse = backend.empty({batch, hl, t}, backend::stats_dtype(dt), kAct);
  backend.attention_forward(out_full, lse, heads_view(qkv_full, 0, hl), heads_view(qkv_full, hl, kvl),
                            heads_view(qkv_full, hl + kvl, kvl), scale, window);

  // Scatter the sequence, gather heads.
  Tensor send_out = backend.empty({p * batch * shape.local_len * hl, d}, dt, kAct);
  gather_rows(backend, send_out, indices_.out_pack, out_full, d);
  Tensor recv_out = backend.empty(send_out.shape(), dt, kAct);
  group.all_to_all(send_out, recv_out);
  send_out = Tensor();
  gather_rows(backend, out, indices_.out_unpack, recv_out, d);

  if (training) {
    qkv_full_ = qkv_full;
    out_full_ = out_full;
    lse_ = lse;
  }
}

void UlyssesAttention::backward(backend::Backend& backend, comm::Comm& group, Tensor& dqkv,
                                const Tensor& dout) {
  ZERO_CHECK(qkv_full_.defined(), "UlyssesAttention::backward without a training forward");
  const Shape& s = shape_;
  const int64_t p = s.ranks, b = s.batch, tl = s.local_len, t = p * tl, d = s.head_dim;
  const int64_t wl = s.local_width(), hl = s.split.q_per_rank, kvl = s.split.kv_per_rank;
  const DType dt = dout.dtype();
  ZERO_CHECK(dout.numel() == b * tl * s.heads * d && dqkv.numel() == b * tl * s.width() * d &&
                 dqkv.is_contiguous() && dout.is_contiguous(),
             "UlyssesAttention::backward: dout " << dout.describe() << " / dqkv " << dqkv.describe()
                                                 << " do not match the forward's shapes");

  // dout: scatter heads, gather the sequence (the reverse of the output exchange).
  Tensor send = backend.empty({p * b * tl * hl, d}, dt, kAct);
  gather_rows(backend, send, indices_.dout_pack, dout, d);
  Tensor recv = backend.empty(send.shape(), dt, kAct);
  group.all_to_all(send, recv);
  send = Tensor();
  Tensor dout_full = backend.empty({b, t, hl, d}, dt, kAct);
  gather_rows(backend, dout_full, indices_.dout_unpack, recv, d);
  recv = Tensor();

  Tensor dqkv_full = backend.empty({b, t, wl, d}, dt, kAct);
  Tensor dq = heads_view(dqkv_full, 0, hl);
  Tensor dk = heads_view(dqkv_full, hl, kvl);
  Tensor dv = heads_view(dqkv_full, hl + kvl, kvl);
  backend.attention_backward(dq, dk, dv, dout_full, heads_view(qkv_full_, 0, hl),
                             heads_view(qkv_full_, hl, kvl), heads_view(qkv_full_, hl + kvl, kvl),
                             out_full_, lse_, scale_, window_);
  dout_full = Tensor();
  release();

  // dq, dk, dv: scatter the sequence, gather heads. Scattering with the forward's packing map
  // adds a replicated KV head's copies into its one gradient (fixed order: by source rank).
  Tensor send_back = backend.empty({p * b * tl * wl, d}, dt, kAct);
  gather_rows(backend, send_back, indices_.qkv_repack, dqkv_full, d);
  dqkv_full = Tensor();
  Tensor recv_back = backend.empty(send_back.shape(), dt, kAct);
  group.all_to_all(send_back, recv_back);
  send_back = Tensor();
  backend.fill(dqkv, 0.0);
  Tensor table = dqkv.reshape({dqkv.numel() / d, d});
  backend.embedding_backward(table, recv_back, indices_.qkv_pack);
}

void UlyssesAttention::release() { qkv_full_ = out_full_ = lse_ = Tensor(); }

}  // namespace zero::model
