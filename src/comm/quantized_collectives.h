// Quantized collectives: ZeRO++'s int8 all-gather of weights (qwZ) and int8 reduce-scatter of
// gradients (qgZ) (Wang et al., "ZeRO++", arXiv 2306.10209), over a Comm and a Backend. Values
// travel as int8 codes with one f32 scale per group of `group` elements
// (backend/int8_groups.h): about 1 + 4/group bytes an element where bf16 takes 2 and f32 4.
//
// Both are lossy by design - each element moves by at most half a quantization step, 1/254 of
// its group's largest magnitude - and deterministic: every rank decodes the same bytes, and the
// reduction sums the decoded chunks in rank order (rank 0's first), as MpiComm sums.
//
// Memory: the packed send and receive buffers are MemoryCategory::kComm, held while the exchange
// runs. Ordering: quantization and decoding run on the backend's current stream; the Comm waits
// for the backend as every collective does. One host thread.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "comm/comm.h"

namespace zero::comm {

// The all-gather of one rank-major buffer, in two halves so the exchange can overlap compute.
class QuantizedAllGather {
 public:
  // Quantizes `shard` (contiguous f32, bf16 or f16 on the backend's device) in groups of `group`
  // elements and starts gathering every rank's packed shard (asynchronously when `async`). A
  // collective: every rank of `comm` calls it with shards of the same element count. `backend`
  // and `comm` must outlive the object; `shard` may be freed once the constructor returns.
  QuantizedAllGather(backend::Backend& backend, Comm& comm, const Tensor& shard, int64_t group,
                     bool async);
  // Waits for the exchange, then decodes rank r's shard into elements [r * n, (r + 1) * n) of
  // `gathered` (contiguous, world * n elements, f32, bf16 or f16; n = the shard's elements).
  void finish(Tensor& gathered);
  // Waits for the exchange without decoding (its buffers may not be freed while it runs).
  void wait();
  // Bytes of one rank's packed shard (what each rank contributes to the exchange).
  int64_t packed_bytes() const { return packed_bytes_; }

 private:
  backend::Backend& backend_;
  Comm& comm_;
  int64_t group_;
  int64_t shard_numel_;
  int64_t packed_bytes_;
  Tensor packed_;    // u8: this rank's packed shard
  Tensor gathered_;  // u8: every rank's, rank-major
  std::shared_ptr<Work> work_;
};

// The reduce-scatter: `input` holds world equal chunks of output.numel() elements (contiguous
// f32, bf16 or f16); rank r receives in `output` (f32, bf16 or f16) the sum over ranks, in rank
// order, of each rank's decoded chunk r, formed in f32 and rounded once per addition to
// output's dtype. Each chunk is quantized on its own in groups of `group` elements and the
// packed chunks travel in one all_to_all. A collective over every rank of `comm`. Synchronous.
void quantized_reduce_scatter(backend::Backend& backend, Comm& comm, const Tensor& input,
                              Tensor& output, int64_t group);

// The same reduction in two hops, DeepSpeed's hierarchical qgZ: the group's N ranks sit in n
// nodes of k consecutive ranks; `node` is this rank's node (k ranks, in rank order) and `column`
// the ranks holding this rank's place in every node (n ranks, in node order). First one
// all_to_all within the node: each rank receives, from every rank of its node, the chunks of all
// destinations that share its place, and sums their decoded values in node-rank order (f32);
// then the n partial sums are quantized again and one all_to_all over `column` hands each rank
// every node's partial sum of its own chunk, summed in node order into `output`. Only 1/k of the
// bytes cross nodes (the one-hop form sends (N - k)/N of them across). With k = 1 or n = 1 it is
// quantized_reduce_scatter over the one group that exists. A collective over the whole group.
void hierarchical_quantized_reduce_scatter(backend::Backend& backend, Comm& node, Comm& column,
                                           const Tensor& input, Tensor& output, int64_t group);

}  // namespace zero::comm
