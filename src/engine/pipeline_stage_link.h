// PipelineStageLink: moves one micro-batch's activation (forward) or activation gradient
// (backward) between neighbouring pipeline stages, whole or partitioned over the tensor-parallel
// group (DeepSpeed's pipeline.pipe_partitioned / grad_partitioned).
//
// With tensor parallelism every tensor rank t of a stage holds the same full tensor [B*T, C]
// (the tensor-parallel units end with an all-reduce; the column-parallel input gradient is
// all-reduced too), and stage s's rank t talks to stage s±1's rank t over its pipeline group.
// Whole: each tensor rank sends all of it, so tp identical copies cross the link. Partitioned:
// rank t sends only part t of the flat tensor (parts of ceil(numel / tp) elements, the last
// zero-padded when tp does not divide numel) and the receiver all-gathers the parts over its
// tensor group: 1/tp of the send/recv bytes per rank, plus one all-gather inside the stage
// (DeepSpeed's PartitionedTensor). The received values are bit-identical either way.
//
// Counting: every send/recv goes through the pipeline Comm (its CommStats), the all-gather
// through the tensor Comm. Ownership: references the Comms and the backend, which must outlive
// it; one thread drives it, in the same order on both ends of a link.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/tensor.h"

namespace zero::engine {

class PipelineStageLink {
 public:
  // `pipe`: the pipeline group (its rank is the stage). `tensor`: the stage's tensor-parallel
  // group, or null without tensor parallelism (then every transfer is whole).
  PipelineStageLink(comm::Comm& pipe, comm::Comm* tensor, backend::Backend& backend);

  // Sends `t` (contiguous, on the backend's device) to `stage` with `tag`: this tensor rank's
  // part when `partitioned` and the tensor group has more than one rank, else all of it.
  // Returns the bytes sent.
  int64_t send(const Tensor& t, int64_t stage, int tag, bool partitioned);
  // Receives into `t` (the full tensor's shape and dtype) what send() with the same
  // `partitioned` sent from `stage`; partitioned, the whole tensor group of this stage must call
  // it together (the all-gather).
  void recv(Tensor& t, int64_t stage, int tag, bool partitioned);

  // Whether `partitioned` transfers are split here (tensor group of more than one rank).
  bool splits(bool partitioned) const;
  // Elements of one part of a tensor of `numel` elements (ceil(numel / tp)).
  int64_t part_elements(int64_t numel) const;

 private:
  comm::Comm& pipe_;
  comm::Comm* tensor_;
  backend::Backend& backend_;
};

}  // namespace zero::engine
