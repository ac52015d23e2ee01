// Where a tensor-parallel part's elements sit in its logical tensor, and gathering the parts of
// a tensor group into the logical (Hugging Face) tensor. Checkpoints and Hugging Face exports of
// a tensor-parallel model use these to store tensors by logical name and logical coordinates,
// so a run saved at one tensor-parallel size loads at any other (engine/tensor_parallel_checkpoint.h).
//
// Mapping (TensorSlice, model/parameter.h): a part of the logical tensor, row-major, is a
// sequence of "segments" of equal length, each a contiguous run of logical elements. Split along
// dim 0 (column-parallel weights, vocabulary rows): one segment per block, part_rows x cols
// elements. Split along dim 1 (row-parallel weights): one segment per (row, block), part_cols
// elements — so a row-parallel part maps to one run per row.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "model/parameter.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

// Local elements [local, local + length) are logical elements [logical, logical + length).
struct SliceRun {
  int64_t local = 0;
  int64_t logical = 0;
  int64_t length = 0;
};

// The runs that local elements [offset, offset + count) of `slice` (flat, row-major, of the
// part's shape) map to, in local order; consecutive runs are merged when contiguous. An absent
// slice (a replicated parameter) maps identically.
std::vector<SliceRun> slice_runs(const std::optional<TensorSlice>& slice, int64_t offset,
                                 int64_t count);

// The shape of the part `slice` describes (what ParamSpec::shape holds for it).
Shape slice_local_shape(const TensorSlice& slice);

// The slice tensor-parallel rank `rank` holds of the same parameter, given any rank's `slice`:
// replicas are consecutive ranks (model/tensor_parallel.h), so its part is rank / replicas.
TensorSlice slice_of_rank(const TensorSlice& slice, int64_t rank);

// Whether tensor-parallel rank `tp_rank` is the one that writes its part of `spec` in a file
// keyed by logical coordinates: rank 0 for a replicated parameter, the first of the replicas
// of a sliced one (every other holder has identical values).
bool writes_tensor_part(const ParamSpec& spec, int64_t tp_rank);

// Collective over `group` (every rank of it calls this for the same parameter, in the same
// order): the logical tensor (host, `local`'s dtype, spec.slice->full_shape) assembled bit for
// bit from every rank's part. `local` is this rank's part (host, contiguous, spec.shape).
// Parameters without a slice, or a null / one-rank group, return `local` itself. One
// all_gather of max-part-size elements per rank through `backend`'s buffers (the buffers the
// group's collectives take: device tensors for a device backend).
Tensor gather_logical_tensor(backend::Backend& backend, comm::Comm* group, const ParamSpec& spec,
                             const Tensor& local);

}  // namespace zero::model
