#include "comm/quantized_collectives.h"

#include "backend/int8_groups.h"
#include "core/check.h"

namespace zero::comm {

QuantizedAllGather::QuantizedAllGather(backend::Backend& backend, Comm& comm, const Tensor& shard,
                                       int64_t group, bool async)
    : backend_(backend),
      comm_(comm),
      group_(group),
      shard_numel_(shard.numel()),
      packed_bytes_(backend::Int8Groups{shard_numel_, group}.packed_bytes()) {
  packed_ = backend_.empty({packed_bytes_}, DType::kU8, MemoryCategory::kComm);
  backend_.quantize_int8_groups(packed_, shard, group);
  gathered_ = backend_.empty({packed_bytes_ * comm_.world_size()}, DType::kU8,
                             MemoryCategory::kComm);
  if (async) {
    work_ = comm_.all_gather_async(packed_, gathered_);
  } else {
    comm_.all_gather(packed_, gathered_);
  }
}

void QuantizedAllGather::wait() {
  if (work_) {
    work_->wait();
    work_.reset();
  }
}

void QuantizedAllGather::finish(Tensor& gathered) {
  const int world = comm_.world_size();
  ZERO_CHECK(gathered.numel() == shard_numel_ * world,
             "QuantizedAllGather: the output holds " << gathered.numel() << " elements, not "
                                                     << world << " x " << shard_numel_);
  wait();
  const int64_t bytes = packed_bytes_;
  for (int r = 0; r < world; ++r) {
    Tensor target = gathered.view(r * shard_numel_, {shard_numel_});
    backend_.dequantize_int8_groups(target, gathered_.view(r * bytes, {bytes}), group_, false);
  }
  packed_ = Tensor();
  gathered_ = Tensor();
}

void quantized_reduce_scatter(backend::Backend& backend, Comm& comm, const Tensor& input,
                              Tensor& output, int64_t group) {
  const int world = comm.world_size();
  const int64_t chunk = output.numel();
  ZERO_CHECK(input.numel() == chunk * world,
             "quantized_reduce_scatter: the input holds " << input.numel() << " elements, not "
                                                          << world << " x " << chunk);
  const int64_t bytes = backend::Int8Groups{chunk, group}.packed_bytes();
  Tensor send = backend.empty({bytes * world}, DType::kU8, MemoryCategory::kComm);
  for (int r = 0; r < world; ++r) {
    Tensor packed = send.view(r * bytes, {bytes});
    backend.quantize_int8_groups(packed, input.view(r * chunk, {chunk}), group);
  }
  Tensor received = backend.empty({bytes * world}, DType::kU8, MemoryCategory::kComm);
  comm.all_to_all(send, received);
  send = Tensor();
  for (int r = 0; r < world; ++r) {
    backend.dequantize_int8_groups(output, received.view(r * bytes, {bytes}), group, r > 0);
  }
}

void hierarchical_quantized_reduce_scatter(backend::Backend& backend, Comm& node, Comm& column,
                                           const Tensor& input, Tensor& output, int64_t group) {
  const int k = node.world_size(), n = column.world_size();
  if (k == 1) return quantized_reduce_scatter(backend, column, input, output, group);
  if (n == 1) return quantized_reduce_scatter(backend, node, input, output, group);
  const int64_t chunk = output.numel();
  ZERO_CHECK(input.numel() == chunk * k * n,
             "hierarchical_quantized_reduce_scatter: the input holds "
                 << input.numel() << " elements, not " << k * n << " x " << chunk);
  const int64_t bytes = backend::Int8Groups{chunk, group}.packed_bytes();
  // Hop 1: block i holds, for every node b, the chunk of destination b * k + i.
  Tensor send = backend.empty({bytes * k * n}, DType::kU8, MemoryCategory::kComm);
  for (int i = 0; i < k; ++i) {
    for (int b = 0; b < n; ++b) {
      Tensor packed = send.view((int64_t{i} * n + b) * bytes, {bytes});
      backend.quantize_int8_groups(packed, input.view((int64_t{b} * k + i) * chunk, {chunk}),
                                   group);
    }
  }
  Tensor received = backend.empty({bytes * k * n}, DType::kU8, MemoryCategory::kComm);
  node.all_to_all(send, received);
  send = Tensor();
  Tensor partial = backend.empty({chunk * n}, DType::kF32, MemoryCategory::kComm);
  for (int i = 0; i < k; ++i) {
    for (int b = 0; b < n; ++b) {
      Tensor target = partial.view(int64_t{b} * chunk, {chunk});
      backend.dequantize_int8_groups(target, received.view((int64_t{i} * n + b) * bytes, {bytes}),
                                     group, i > 0);
    }
  }
  received = Tensor();
  // Hop 2: node b's partial sum of chunk b * k + (this place) goes to node b.
  quantized_reduce_scatter(backend, column, partial, output, group);
}

}  // namespace zero::comm
