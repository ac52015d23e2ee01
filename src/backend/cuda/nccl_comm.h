// NcclComm: the Comm interface over NCCL for the tensors of one CudaBackend (one GPU per rank).
// A host Comm (MpiComm for a job, SelfComm for one process) is used once, at construction, to
// broadcast rank 0's ncclUniqueId; every later collective runs on the GPU.
//
// Ordering: each call records an event on the backend's current stream (compute, unless a
// StreamGuard selected another), makes the comm stream (backend.stream(StreamKind::kComm)) wait
// for it, enqueues the NCCL operation on the comm stream and records a completion event there.
// The blocking forms make the current stream wait for that event before returning, so work the
// caller enqueues afterwards sees the result; the host is not blocked (except by barrier(), which
// waits for the group on the host). The asynchronous forms return a Work whose wait() makes the
// current stream wait for the completion event (again without blocking the host) and whose
// is_completed() queries it. Layers therefore need no change whichever Comm they are given.
//
// Failures: a failed call throws zero::Error naming it. A failure NCCL finds on its own later (a
// peer rank died, the network broke: ncclCommGetAsyncError) is checked while the backend's host
// waits for the device (CudaBackend::add_host_wait_check, every 0.1 s): the communicator is
// aborted and the wait throws, instead of waiting forever on a collective that cannot finish.
//
// DEVIATION FROM comm.h: NCCL reduces in an order of its own choosing (ring/tree, chunked), not
// the left fold over ranks 0..N-1 that comm.h asks for. Results are the same on every rank of
// one collective but are not bit-identical to a rank-order sum, nor to a 1-rank run that
// accumulates the same contributions; they agree within floating-point rounding. NcclComm trades
// that guarantee for speed; use HostStagedComm over MpiComm where bit-exact rank-order sums are
// needed. Max and min are exact. At world size 1 every collective is an exact copy.
//
// Dtypes: f32, bf16, f16, f64, i32, i64 (16-bit sums accumulate as NCCL does, in the dtype).
// Tensors: contiguous, and all of one call on the backend's device or all on the host. Host
// tensors (the engine's host scalars: Comm::all_reduce_scalar, checkpoint coordination) go
// through the host Comm with its semantics (rank-order sums included) and are counted here too;
// a call mixing host and device tensors is refused. Point-to-point: NCCL has no tags, so `tag` is ignored and messages between one
// pair match in issue order; send/recv are stream-ordered like the collectives.
//
// Stats: counted per call at issue with comm.h's message and traffic formulas (as MpiComm);
// seconds are host time from issue to enqueue for the blocking forms and from issue to wait()
// for the asynchronous ones (GPU time is not measured).
//
// Ownership and lifetime: `backend` and the host Comm must outlive this (and every Comm split()
// returns: each owns the matching split of the host Comm); NcclComm must be destroyed before
// the backend. Ranks sharing one GPU cannot use NCCL (it refuses duplicate devices): use
// HostStagedComm. Thread safety: as Comm.
//
// Only built with CUDA and NCCL (ZERO_HAVE_NCCL).
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "comm/comm.h"

namespace zero::comm {

// This process's rank among the processes of its node, from the launcher's environment:
// OMPI_COMM_WORLD_LOCAL_RANK (OpenMPI), SLURM_LOCALID (srun) or MPI_LOCALRANKID (MPICH/Intel
// MPI), the first one set. 0 when none is set (a single process). Throws ConfigError when the
// value is not a non-negative decimal integer.
int local_rank_from_environment();

class NcclComm final : public Comm {
 public:
  // Collective over `host` (every rank of it calls this): creates one NCCL communicator with
  // host's ranks, on `backend`'s device. Throws zero::Error naming the NCCL call that failed.
  NcclComm(Comm& host, backend::CudaBackend& backend);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string name() const override;

  void all_reduce(Tensor& tensor, ReduceOp op) override;
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void all_gather(const Tensor& input, Tensor& output) override;
  void all_to_all(const Tensor& input, Tensor& output) override;
  void broadcast(Tensor& tensor, int root) override;
  void send(const Tensor& tensor, int dest, int tag) override;
  void recv(Tensor& tensor, int source, int tag) override;
  void barrier() override;

  std::shared_ptr<Work> all_reduce_async(Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& input, Tensor& output,
                                             ReduceOp op) override;
  std::shared_ptr<Work> all_gather_async(const Tensor& input, Tensor& output) override;

  // ncclCommSplit; `color` must be >= 0. The host Comm is split with the same color and key (the
  // new group owns it), so the group's host-tensor calls - all_reduce_scalar, the engine's loss
  // and checkpoint scalars - stay within the group, as its device calls do. Both splits order
  // ranks by key, ties by rank in this group, so the two agree (checked). Shares the backend.
  std::unique_ptr<Comm> split(int color, int key) override;
  // ncclCommAbort (pending collectives are abandoned), then the host Comm's abort_job.
  void abort_job(int code) override;

  struct Handle;  // the ncclComm_t (defined in nccl_comm.cpp)

 private:
  // A split() group: `handle` from ncclCommSplit, `host` the host Comm split the same way.
  NcclComm(std::unique_ptr<Handle> handle, std::unique_ptr<Comm> host, backend::CudaBackend& backend);
  // Orders the comm stream after the current stream's work, runs `enqueue` (which puts the NCCL
  // operation on the comm stream) and returns the event recorded after it. Counts the call.
  backend::Event launch(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                        const char* op, const std::function<void()>& enqueue);
  // launch(), then the current stream waits for the collective (the blocking forms).
  void launch_blocking(OpKind kind, int64_t message_bytes, int64_t traffic_bytes, const char* op,
                       const std::function<void()>& enqueue);
  // True when every tensor of the call is on the host (the host Comm runs it), false when every
  // one is on the backend's device; throws otherwise or for a non-contiguous tensor.
  bool host_call(std::initializer_list<const Tensor*> tensors, const char* op) const;
  // Runs a host-tensor call on the host Comm and counts it.
  void run_on_host(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                   const std::function<void()>& call);
  std::shared_ptr<Work> issue_on_host(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                                      std::shared_ptr<Work> work);
  void count(OpKind kind, int64_t message_bytes, int64_t traffic_bytes);
  // Registers the backend host-wait check that turns an asynchronous NCCL failure into an error.
  void watch_for_async_errors();

  std::unique_ptr<Handle> handle_;
  std::unique_ptr<Comm> owned_host_;  // split() groups only: the split host Comm host_ refers to
  Comm& host_;
  backend::CudaBackend& backend_;
  int rank_ = 0;
  int size_ = 1;
  Tensor barrier_scratch_;  // one device int32 for barrier()
  int check_id_ = 0;        // the backend host-wait check's id (0: none)
};

}  // namespace zero::comm
