// Comm: the process-group interface every collective goes through (data-parallel gradients,
// ZeRO partitions, overflow flags, norms, checkpoint coordination). Implementations: SelfComm
// (one rank, comm/self_comm.h), MpiComm over OpenMPI (comm/mpi_comm.h), HostStagedComm (device
// tensors through host buffers, comm/host_staged_comm.h), NcclComm (backend/cuda/nccl_comm.h).
//
// Rules:
// * Collectives are called by every rank of the group in the same order (asynchronous ones
//   included: issue order is the order on the wire).
// * Tensors are contiguous, on a device the implementation supports (host memory for Self/MPI),
//   and of the same dtype and element count on every rank where the call says so.
// * Reductions are deterministic: a sum is formed in rank order 0, 1, ..., N-1 (a left fold),
//   so every rank gets bit-identical results and a 1-rank run that accumulates the same
//   contributions in the same order gets the same bits. Implementations must keep this.
//   The one exception is NcclComm (backend/cuda/nccl_comm.h): NCCL's ring/tree sums are not a
//   rank-order fold, so it trades that guarantee for speed, and says so.
// * Asynchronous calls return a Work; the tensors they touch must stay alive and unmodified
//   (outputs unread) until wait() returns. wait() rethrows an error the operation stored.
// * Thread safety: one thread issues calls on a Comm; implementations may progress
//   asynchronous work on their own thread.
// * Every call is counted (calls, bytes, seconds) in stats(), per operation kind.
#pragma once
#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace zero::comm {

enum class ReduceOp { kSum, kMax, kMin };

enum class OpKind : int {
  kAllReduce = 0,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
};
inline constexpr int kNumOpKinds = 8;
const char* op_kind_name(OpKind kind);

// Counters of one operation kind on this rank.
struct OpStats {
  int64_t calls = 0;
  // Message size as DeepSpeed's comms logger reports it: the bytes of the (full, unpartitioned)
  // buffer the operation is about: all_reduce/broadcast/send/recv: the tensor; reduce_scatter:
  // the input (N chunks); all_gather: the output (N chunks); all_to_all: the input.
  int64_t message_bytes = 0;
  // Bytes this rank puts on the wire under a bandwidth-optimal algorithm: reduce_scatter and
  // all_gather (N-1)/N of the message, all_reduce 2(N-1)/N, all_to_all (N-1)/N, broadcast the
  // message on the root (0 elsewhere), send the message, recv 0. The ZeRO traffic claims
  // (2Ψ per step for stages 0-2, 3Ψ for stage 3) are tested against this.
  int64_t traffic_bytes = 0;
  // Wall time from issue to completion (wait() for asynchronous calls), summed.
  double seconds = 0.0;
};

struct CommStats {
  std::array<OpStats, kNumOpKinds> ops{};
  const OpStats& at(OpKind kind) const { return ops[static_cast<int>(kind)]; }
  OpStats& at(OpKind kind) { return ops[static_cast<int>(kind)]; }
  int64_t total_traffic_bytes() const;
};

// Handle of an asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished; rethrows the error it stored, if any. Idempotent.
  virtual void wait() = 0;
  // True once the operation finished (successfully or not); never blocks.
  virtual bool is_completed() = 0;
  // The stored error (null when none or not finished).
  virtual std::exception_ptr error() = 0;
};

// A Work that is already complete (synchronous implementations return it).
class CompletedWork final : public Work {
 public:
  explicit CompletedWork(std::exception_ptr error = nullptr) : error_(std::move(error)) {}
  void wait() override {
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() override { return true; }
  std::exception_ptr error() override { return error_; }

 private:
  std::exception_ptr error_;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;

  // Elementwise reduction of `tensor` across ranks, result on every rank (in place).
  virtual void all_reduce(Tensor& tensor, ReduceOp op) = 0;
  // `input` holds N equal chunks (chunk r = elements [r*c, (r+1)*c), c = output.numel()); rank
  // r receives the reduction of every rank's chunk r in `output`. input and output must not
  // overlap.
  virtual void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) = 0;
  // Rank r's `input` lands at elements [r*n, (r+1)*n) of every rank's `output` (n =
  // input.numel(), output.numel() = N*n). `input` may be that very slice of `output`.
  virtual void all_gather(const Tensor& input, Tensor& output) = 0;
  // Chunk j of rank i's input lands in chunk i of rank j's output (N equal chunks each).
  virtual void all_to_all(const Tensor& input, Tensor& output) = 0;
  // Copies root's `tensor` to every rank (in place).
  virtual void broadcast(Tensor& tensor, int root) = 0;
  // Point-to-point (blocking). Tags separate concurrent streams between the same pair.
  virtual void send(const Tensor& tensor, int dest, int tag) = 0;
  virtual void recv(Tensor& tensor, int source, int tag) = 0;
  virtual void barrier() = 0;

  // Asynchronous forms: same semantics, completion through the returned Work.
  virtual std::shared_ptr<Work> all_reduce_async(Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> reduce_scatter_async(const Tensor& input, Tensor& output,
                                                     ReduceOp op) = 0;
  virtual std::shared_ptr<Work> all_gather_async(const Tensor& input, Tensor& output) = 0;

  // Ranks calling with the same `color` form a new group, ordered by (key, old rank). Every
  // rank of this group must call it. Returns the new group (owned by the caller).
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;

  // Best-effort: brings every process of the job down (exit code `code`) after `message` was
  // printed by the caller. Used by the command-line front end when one rank fails, so the
  // others never hang in a collective. Never returns for MPI; SelfComm returns.
  virtual void abort_job(int code) = 0;

  // Convenience for host scalars (norms, overflow flags, counters).
  double all_reduce_scalar(double value, ReduceOp op);

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  CommStats stats_;
};

}  // namespace zero::comm
