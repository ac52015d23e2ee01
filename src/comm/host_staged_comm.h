// HostStagedComm: any Comm over device tensors, through host staging buffers. Each collective
// copies its device inputs to pinned host memory (Backend::pinned_host_allocator()), runs the
// wrapped host Comm (MpiComm) on them and copies the results back to the device. It is how ranks
// that share one GPU (where NCCL refuses two ranks per device) or a device backend without a
// device-aware communicator train together, and how the simulated device backend runs ZeRO
// across processes. Host tensors pass straight through.
//
// Semantics are the wrapped Comm's (determinism included: the reduction runs on the host
// copies). Asynchronous calls stage their inputs when issued and copy the results back in
// wait(). stats() mirrors the wrapped Comm's counters. Ownership: `inner` (unless owned, as for
// split()) and `backend` must outlive this. Thread safety: as Comm (one issuing thread; wait()
// on that thread too, since it uses the backend).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "comm/comm.h"

namespace zero::comm {

class HostStagedComm final : public Comm {
 public:
  HostStagedComm(Comm& inner, backend::Backend& backend);
  HostStagedComm(std::unique_ptr<Comm> owned_inner, backend::Backend& backend);

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return "host-staged " + inner_.name(); }

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

  std::unique_ptr<Comm> split(int color, int key) override;
  void abort_job(int code) override { inner_.abort_job(code); }

 private:
  // A pinned host copy of `t` (t itself when it already is on the host).
  Tensor staged_copy(const Tensor& t);
  // A pinned host buffer shaped like `t`, contents undefined (t itself when on the host).
  Tensor staged_like(const Tensor& t);
  // Copies a staged result back into `t` (nothing when `staged` is `t`).
  void unstage(Tensor& t, const Tensor& staged);
  void mirror_stats() { stats_ = inner_.stats(); }

  std::unique_ptr<Comm> owned_;
  Comm& inner_;
  backend::Backend& backend_;
};

}  // namespace zero::comm
