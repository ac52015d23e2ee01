// CompressedAllReduce: 1-bit Adam's compressed all-reduce with error feedback (DeepSpeed's
// compressed_allreduce; Tang et al., "1-bit Adam", arXiv 2102.02888), over a Comm and a Backend.
//
// Each rank adds its worker error to its buffer, sends one sign bit an element and one f32 scale
// a parameter tensor (scale = RMS, so sign * scale keeps the tensor's magnitude), and keeps what
// the compression lost as its new worker error. Rank r is the server of chunk r of every tensor:
// it averages the ranks' decoded chunks, adds its server error and compresses again; the servers'
// signs and scales are all-gathered and decoded, so every rank ends with the same values.
// Each rank sends about 2 (N-1)/N bits an element (an all-to-all and an all-gather of signs,
// plus a scale a tensor) where a ring all-reduce of f32 sends 64 (N-1)/N.
//
// Layout and arithmetic: backend/onebit_layout.h and Backend::onebit_* (backend.h). Memory
// (accounted): the worker error (f32, every element padded) and server error (f32, 1/world of
// that) are MemoryCategory::kOptimizer, held for the object's lifetime; the bits and scales in
// flight are kComm, freed at the end of each run(). Ordering: everything runs on the backend's
// current stream and the Comm's own ordering (the Comm waits for the backend as every
// collective does). One host thread.
#pragma once
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "backend/onebit_layout.h"
#include "comm/comm.h"

namespace zero::comm {

class CompressedAllReduce {
 public:
  // `segments` (elements of the values buffers run() will get; one per parameter tensor) and
  // the group `comm` are fixed for the object's life; backend and comm must outlive it. The
  // errors start at zero.
  CompressedAllReduce(backend::Backend& backend, Comm& comm,
                      std::span<const backend::ParamSegment> segments);

  // Replaces every segment of `values` (contiguous f32 on the backend's device) by the
  // compressed average over the group's ranks; elements outside the segments are left alone.
  // A collective: every rank of the group calls it, with buffers of the same layout.
  void run(Tensor& values);

  const backend::OneBitLayout& layout() const { return layout_; }
  backend::Backend& backend() { return backend_; }
  // This rank's errors (checkpoints save and restore them; they differ from rank to rank).
  Tensor& worker_error() { return worker_error_; }
  Tensor& server_error() { return server_error_; }
  void reset_errors();
  // Bytes this rank sends in one run(): signs in both exchanges plus the scales.
  int64_t bytes_sent_per_run() const;

 private:
  backend::Backend& backend_;
  Comm& comm_;
  backend::OneBitLayout layout_;
  Tensor worker_error_;
  Tensor server_error_;
};

}  // namespace zero::comm
