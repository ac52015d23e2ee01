#include "model/tensor_slice_gather.h"

#include <algorithm>
#include <cstring>

#include "comm/comm.h"
#include "core/check.h"
#include "model/tensor_parallel.h"

namespace zero::model {
namespace {

// The segment geometry of a slice (see the header): every segment has `length` elements.
struct Segments {
  int64_t length = 0;
  int64_t blocks = 1;
  int64_t block = 0;       // logical length of one block along the split dimension
  int64_t part_begin = 0;  // where this part starts inside each block
  int64_t cols = 1;        // logical row length (1 for a 1-d tensor)
  int dim = 0;

  // The logical element segment `k` starts at.
  int64_t logical_start(int64_t k) const {
    if (dim == 0) return (k * block + part_begin) * cols;
    const int64_t row = k / blocks;
    return row * cols + (k % blocks) * block + part_begin;
  }
};

Segments segments_of(const TensorSlice& s) {
  const Shape& full = s.full_shape;
  ZERO_CHECK(!full.empty() && full.size() <= 2 && s.dim >= 0 &&
                 s.dim < static_cast<int>(full.size()) && s.blocks > 0 && s.parts > 0,
             "tensor slices of 1-d and 2-d tensors only, got a " << full.size()
                                                                 << "-d tensor split along " << s.dim);
  Segments g;
  g.dim = s.dim;
  g.blocks = s.blocks;
  g.cols = full.size() == 2 ? full[1] : 1;
  g.block = full[static_cast<size_t>(s.dim)] / s.blocks;
  const Range part = balanced_part(g.block, s.parts, s.index);
  g.part_begin = part.begin;
  g.length = s.dim == 0 ? part.size() * g.cols : part.size();
  return g;
}

}  // namespace

std::vector<SliceRun> slice_runs(const std::optional<TensorSlice>& slice, int64_t offset,
                                 int64_t count) {
  std::vector<SliceRun> runs;
  if (count <= 0) return runs;
  if (!slice) {
    runs.push_back({offset, offset, count});
    return runs;
  }
  const Segments g = segments_of(*slice);
  ZERO_CHECK(g.length > 0, "an empty tensor slice cannot hold elements " << offset << "+" << count);
  const int64_t end = offset + count;
  for (int64_t pos = offset, k = offset / g.length; pos < end; ++k) {
    const int64_t within = pos - k * g.length;
    const int64_t length = std::min(g.length - within, end - pos);
    const int64_t logical = g.logical_start(k) + within;
    if (!runs.empty() && runs.back().logical + runs.back().length == logical) {
      runs.back().length += length;
    } else {
      runs.push_back({pos, logical, length});
    }
    pos += length;
  }
  return runs;
}

Shape slice_local_shape(const TensorSlice& slice) {
  Shape shape = slice.full_shape;
  const int64_t block = shape[static_cast<size_t>(slice.dim)] / slice.blocks;
  shape[static_cast<size_t>(slice.dim)] =
      balanced_part(block, slice.parts, slice.index).size() * slice.blocks;
  return shape;
}

TensorSlice slice_of_rank(const TensorSlice& slice, int64_t rank) {
  TensorSlice out = slice;
  out.index = rank / slice.replicas;
  return out;
}

bool writes_tensor_part(const ParamSpec& spec, int64_t tp_rank) {
  if (!spec.slice) return tp_rank == 0;
  return tp_rank % spec.slice->replicas == 0;
}

Tensor gather_logical_tensor(backend::Backend& backend, comm::Comm* group, const ParamSpec& spec,
                             const Tensor& local) {
  if (!spec.slice || group == nullptr || group->world_size() == 1) return local;
  const TensorSlice& slice = *spec.slice;
  const int64_t ranks = group->world_size();
  ZERO_CHECK(slice.parts * slice.replicas == ranks,
             "parameter " << spec.name << " is split into " << slice.parts << " parts x "
                          << slice.replicas << " replicas, but the tensor group has " << ranks
                          << " ranks");
  ZERO_CHECK(local.device().is_cpu() && local.is_contiguous() && local.numel() == shape_numel(spec.shape),
             "gather_logical_tensor: " << spec.name << " needs its host part, got " << local.describe());
  int64_t widest = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    widest = std::max(widest, shape_numel(slice_local_shape(slice_of_rank(slice, r))));
  }
  const size_t elem = local.element_size();
  // Every rank sends `widest` elements (parts of a balanced split differ by a row).
  Tensor padded = Tensor::zeros_host({widest}, local.dtype());
  std::memcpy(padded.raw_data(), local.raw_data(), static_cast<size_t>(local.numel()) * elem);
  Tensor send = backend.empty({widest}, local.dtype(), MemoryCategory::kWorkspace);
  Tensor received = backend.empty({ranks * widest}, local.dtype(), MemoryCategory::kWorkspace);
  backend.copy_from_host(send, padded.raw_data());
  group->all_gather(send, received);
  Tensor all = Tensor::empty(cpu_allocator(), {ranks * widest}, local.dtype(), MemoryCategory::kOther);
  backend.copy_to_host(all.raw_data(), received);

  Tensor full = Tensor::zeros_host(slice.full_shape, local.dtype());
  const auto* from = static_cast<const char*>(all.raw_data());
  auto* to = static_cast<char*>(full.raw_data());
  int64_t placed = 0;
  for (int64_t r = 0; r < ranks; r += slice.replicas) {  // one holder of each part
    const TensorSlice part = slice_of_rank(slice, r);
    const int64_t numel = shape_numel(slice_local_shape(part));
    for (const SliceRun& run : slice_runs(part, 0, numel)) {
      std::memcpy(to + static_cast<size_t>(run.logical) * elem,
                  from + static_cast<size_t>(r * widest + run.local) * elem,
                  static_cast<size_t>(run.length) * elem);
    }
    placed += numel;
  }
  ZERO_CHECK(placed == full.numel(), "the parts of " << spec.name << " cover " << placed << " of "
                                                     << full.numel() << " logical elements");
  return full;
}

}  // namespace zero::model
