#include "comm/compressed_all_reduce.h"

namespace zero::comm {

CompressedAllReduce::CompressedAllReduce(backend::Backend& backend, Comm& comm,
                                         std::span<const backend::ParamSegment> segments)
    : backend_(backend),
      comm_(comm),
      layout_(backend::OneBitLayout::build(segments, comm.world_size())) {
  worker_error_ = backend_.zeros({layout_.worker_elements}, DType::kF32, MemoryCategory::kOptimizer);
  server_error_ = backend_.zeros({layout_.server_elements}, DType::kF32, MemoryCategory::kOptimizer);
}

void CompressedAllReduce::reset_errors() {
  backend_.fill(worker_error_, 0.0);
  backend_.fill(server_error_, 0.0);
}

int64_t CompressedAllReduce::bytes_sent_per_run() const {
  const int64_t others = layout_.world - 1;
  const int64_t scale_bytes = layout_.segment_count() * 4;
  // To every other rank: its block of the all-to-all, this rank's served block, and both scales.
  return others * (2 * layout_.block_bytes + 2 * scale_bytes);
}

void CompressedAllReduce::run(Tensor& values) {
  const int64_t world = layout_.world;
  const int64_t segments = layout_.segment_count();
  if (segments == 0) return;
  const auto empty = [&](int64_t n, DType dtype) {
    return backend_.empty({n}, dtype, MemoryCategory::kComm);
  };
  // Phase 1: each rank compresses its buffer; chunk r of every tensor goes to rank r.
  Tensor worker_bits = empty(world * layout_.block_bytes, DType::kU8);
  Tensor worker_scales = empty(segments, DType::kF32);
  backend_.onebit_worker_compress(worker_bits, worker_scales, worker_error_, values, layout_);
  Tensor served_bits = empty(world * layout_.block_bytes, DType::kU8);
  comm_.all_to_all(worker_bits, served_bits);
  Tensor all_worker_scales = empty(world * segments, DType::kF32);
  comm_.all_gather(worker_scales, all_worker_scales);
  worker_bits = Tensor();
  // Phase 2: each server averages and recompresses its chunk; everyone gathers the chunks.
  Tensor server_bits = empty(layout_.block_bytes, DType::kU8);
  Tensor server_scales = empty(segments, DType::kF32);
  backend_.onebit_server_compress(server_bits, server_scales, server_error_, served_bits,
                                  all_worker_scales, layout_);
  served_bits = Tensor();
  Tensor all_server_bits = empty(world * layout_.block_bytes, DType::kU8);
  comm_.all_gather(server_bits, all_server_bits);
  Tensor all_server_scales = empty(world * segments, DType::kF32);
  comm_.all_gather(server_scales, all_server_scales);
  backend_.onebit_decompress(values, all_server_bits, all_server_scales, layout_);
}

}  // namespace zero::comm
