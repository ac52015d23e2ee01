// Comm: the process-group interface every collective goes through (data-parallel gradients,
// overflow flags, norms, checkpoint coordination). Implementations: SelfComm (one rank);
// MpiComm and NcclComm come with the ZeRO and CUDA issues through this same interface.
//
// Rules: collectives are called by every rank of the group in the same order. Tensors are
// contiguous and live on a device the implementation supports (host memory for SelfComm/MPI).
// In-place: all_reduce and broadcast overwrite their argument.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace zero::comm {

enum class ReduceOp { kSum, kMax, kMin };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;

  // Elementwise reduction of `tensor` across ranks, result on every rank (in place).
  virtual void all_reduce(Tensor& tensor, ReduceOp op) = 0;
  // Copies root's `tensor` to every rank (in place).
  virtual void broadcast(Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // Convenience for host scalars (norms, overflow flags, counters).
  double all_reduce_scalar(double value, ReduceOp op);
};

// The group of one process: every collective is the identity.
class SelfComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "self"; }
  void all_reduce(Tensor&, ReduceOp) override {}
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
};

}  // namespace zero::comm
