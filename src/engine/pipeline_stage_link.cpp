#include "engine/pipeline_stage_link.h"

#include <algorithm>

#include "core/check.h"

namespace zero::engine {

PipelineStageLink::PipelineStageLink(comm::Comm& pipe, comm::Comm* tensor,
                                     backend::Backend& backend)
    : pipe_(pipe), tensor_(tensor), backend_(backend) {}

bool PipelineStageLink::splits(bool partitioned) const {
  return partitioned && tensor_ != nullptr && tensor_->world_size() > 1;
}

int64_t PipelineStageLink::part_elements(int64_t numel) const {
  const int64_t tp = tensor_ == nullptr ? 1 : tensor_->world_size();
  return (numel + tp - 1) / tp;
}

int64_t PipelineStageLink::send(const Tensor& t, int64_t stage, int tag, bool partitioned) {
  ZERO_CHECK(t.defined() && t.is_contiguous(), "pipeline send of a missing or strided tensor");
  if (!splits(partitioned)) {
    pipe_.send(t, static_cast<int>(stage), tag);
    return static_cast<int64_t>(t.nbytes());
  }
  const int64_t numel = t.numel();
  const int64_t chunk = part_elements(numel);
  const int64_t begin = static_cast<int64_t>(tensor_->rank()) * chunk;
  const int64_t count = std::clamp<int64_t>(numel - begin, 0, chunk);
  Tensor part;
  if (count == chunk) {
    part = t.view(begin, {chunk});
  } else {
    // The last part(s) of a tensor tp does not divide: zero-padded to the common part size,
    // so the receiver's all-gather has equal pieces.
    part = backend_.zeros({chunk}, t.dtype(), MemoryCategory::kActivations);
    if (count > 0) {
      Tensor head = part.view(0, {count});
      backend_.copy(head, t.view(begin, {count}));
    }
  }
  pipe_.send(part, static_cast<int>(stage), tag);
  return static_cast<int64_t>(part.nbytes());
}

void PipelineStageLink::recv(Tensor& t, int64_t stage, int tag, bool partitioned) {
  ZERO_CHECK(t.defined() && t.is_contiguous(), "pipeline recv into a missing or strided tensor");
  if (!splits(partitioned)) {
    pipe_.recv(t, static_cast<int>(stage), tag);
    return;
  }
  const int64_t numel = t.numel();
  const int64_t tp = tensor_->world_size();
  const int64_t chunk = part_elements(numel);
  const int64_t begin = static_cast<int64_t>(tensor_->rank()) * chunk;
  if (chunk * tp == numel) {
    // Each rank's part lands in place; the all-gather fills in the others'.
    Tensor part = t.view(begin, {chunk});
    pipe_.recv(part, static_cast<int>(stage), tag);
    Tensor whole = t.view(0, {numel});
    tensor_->all_gather(part, whole);
    return;
  }
  Tensor gathered = backend_.empty({chunk * tp}, t.dtype(), MemoryCategory::kActivations);
  Tensor part = gathered.view(begin, {chunk});
  pipe_.recv(part, static_cast<int>(stage), tag);
  tensor_->all_gather(part, gathered);
  Tensor whole = t.view(0, {numel});
  backend_.copy(whole, gathered.view(0, {numel}));
}

}  // namespace zero::engine
