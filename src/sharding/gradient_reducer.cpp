#include "sharding/gradient_reducer.h"

#include <algorithm>
#include <cstddef>

#include "comm/quantized_collectives.h"
#include "core/check.h"
#include "sharding/dtype_ops.h"

namespace zero::sharding {
namespace {

int64_t shard_sum(const PartitionLayout& layout, size_t first, size_t last) {
  int64_t total = 0;
  for (size_t u = first; u <= last; ++u) total += layout.unit(u).shard_numel;
  return total;
}

}  // namespace

void pack_unit_shards(backend::Backend& backend, const PartitionLayout& layout, size_t first,
                      size_t last, const std::vector<Tensor>& sources, Tensor& staging) {
  const int64_t chunk = shard_sum(layout, first, last);
  ZERO_CHECK(staging.numel() == chunk * layout.world_size(), "staging buffer has the wrong size");
  ZERO_CHECK(sources.size() == last - first + 1, "one source per unit expected");
  for (int r = 0; r < layout.world_size(); ++r) {
    int64_t at = r * chunk;
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout.unit(u);
      const int64_t count = part.owned_count(r);
      if (count > 0) {
        Tensor dst = staging.view(at, {count});
        backend.copy(dst, sources[u - first].view(part.owned_begin(r), {count}));
      }
      if (count < part.shard_numel) {
        Tensor tail = staging.view(at + count, {part.shard_numel - count});
        backend.fill(tail, 0.0);
      }
      at += part.shard_numel;
    }
  }
}

void unpack_unit_shards(backend::Backend& backend, const PartitionLayout& layout, size_t first,
                        size_t last, const Tensor& staging, std::vector<Tensor>& targets) {
  const int64_t chunk = shard_sum(layout, first, last);
  ZERO_CHECK(staging.numel() == chunk * layout.world_size(), "staging buffer has the wrong size");
  for (int r = 0; r < layout.world_size(); ++r) {
    int64_t at = r * chunk;
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout.unit(u);
      const int64_t count = part.owned_count(r);
      if (count > 0) {
        Tensor dst = targets[u - first].view(part.owned_begin(r), {count});
        backend.copy(dst, staging.view(at, {count}));
      }
      at += part.shard_numel;
    }
  }
}

GradientReducer::GradientReducer(backend::Backend& backend, comm::Comm& comm,
                                 const PartitionLayout& layout, int64_t bucket_elements,
                                 bool overlap, DType comm_dtype, ExposedCommTime& exposed,
                                 ReductionOptions options, backend::Backend* host)
    : backend_(backend),
      comm_(comm),
      layout_(layout),
      bucket_elements_(std::max<int64_t>(bucket_elements, 1)),
      overlap_(overlap),
      comm_dtype_(comm_dtype),
      exposed_(exposed),
      options_(options),
      host_(host) {}

void GradientReducer::add(size_t u, const Tensor& unit_grad, Tensor& partition_grads) {
  // Buckets are runs of consecutive units (their shards are adjacent in the partition).
  if (!open_.empty() && open_.back().first != u + 1) launch(partition_grads);
  open_.emplace_back(u, unit_grad);
  open_elements_ += layout_.unit(u).padded_numel;
  if (open_elements_ >= bucket_elements_) launch(partition_grads);
  complete_finished(partition_grads);
}

void GradientReducer::complete_finished(Tensor& partition_grads) {
  // Buckets whose reduction already finished are taken in while backward goes on: their staging
  // buffers are freed early and, under offload, their download overlaps the remaining backward.
  // Each bucket has its own range of the partition, so the order of completion cannot change a
  // bit; oldest first keeps it simple.
  size_t done = 0;
  while (done < in_flight_.size() && in_flight_[done].work->is_completed()) {
    complete(in_flight_[done], partition_grads);
    ++done;
  }
  in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(done));
}

void GradientReducer::launch(Tensor& partition_grads) {
  if (open_.empty()) return;
  const size_t first = open_.back().first;
  const size_t last = open_.front().first;
  std::vector<Tensor> sources(last - first + 1);
  for (auto& [u, grad] : open_) sources[u - first] = grad;
  const int64_t chunk = shard_sum(layout_, first, last);
  InFlight op;
  op.staging = backend_.empty({chunk * layout_.world_size()}, comm_dtype_, MemoryCategory::kComm);
  pack_unit_shards(backend_, layout_, first, last, sources, op.staging);
  open_.clear();
  open_elements_ = 0;
  if (options_.prescale != 1.0) backend_.scale(op.staging, options_.prescale);
  op.partition_offset = layout_.unit(first).partition_offset;
  if (!options_.reduce_scatter) {
    // The whole bucket is summed on every rank; this rank's slice is its rank-major chunk.
    op.output = op.staging.view(chunk * layout_.rank(), {chunk});
    if (overlap_) {
      op.work = comm_.all_reduce_async(op.staging, comm::ReduceOp::kSum);
      in_flight_.push_back(std::move(op));
    } else {
      {
        ExposedScope blocked(exposed_);
        comm_.all_reduce(op.staging, comm::ReduceOp::kSum);
      }
      complete(op, partition_grads);
    }
    return;
  }
  if (options_.quantization_group > 0) {
    op.output = backend_.empty({chunk}, DType::kF32, MemoryCategory::kComm);
    {
      ExposedScope blocked(exposed_);
      if (options_.node != nullptr && options_.column != nullptr) {
        comm::hierarchical_quantized_reduce_scatter(backend_, *options_.node, *options_.column,
                                                    op.staging, op.output,
                                                    options_.quantization_group);
      } else {
        comm::quantized_reduce_scatter(backend_, comm_, op.staging, op.output,
                                       options_.quantization_group);
      }
    }
    op.staging = Tensor();
    complete(op, partition_grads);
    return;
  }
  op.output = backend_.empty({chunk}, comm_dtype_, MemoryCategory::kComm);
  if (overlap_) {
    op.work = comm_.reduce_scatter_async(op.staging, op.output, comm::ReduceOp::kSum);
    in_flight_.push_back(std::move(op));
  } else {
    {
      ExposedScope blocked(exposed_);
      comm_.reduce_scatter(op.staging, op.output, comm::ReduceOp::kSum);
    }
    complete(op, partition_grads);
  }
}

void GradientReducer::complete(InFlight& op, Tensor& partition_grads) {
  if (op.work) {
    ExposedScope blocked(exposed_);
    op.work->wait();
  }
  Tensor target = partition_grads.view(op.partition_offset, {op.output.numel()});
  if (host_ != nullptr) {
    Tensor down = host_->empty({op.output.numel()}, op.output.dtype(), MemoryCategory::kComm);
    backend_.copy_to_host(down.raw_data(), op.output);
    accumulate(*host_, target, down);
    return;
  }
  accumulate(backend_, target, op.output);
}

void GradientReducer::flush(Tensor& partition_grads) {
  launch(partition_grads);
  for (InFlight& op : in_flight_) complete(op, partition_grads);
  in_flight_.clear();
}

}  // namespace zero::sharding
