// SelfComm: the group of one process. Reductions and gathers are copies (the rank's own
// contribution is the result), so code written for N ranks runs unchanged at N = 1; calls are
// still counted (with zero traffic: nothing leaves the process).
//
// Device tensors: tensors of a GPU backend are copied by that backend (pass it to the
// constructor); host and simulated-device memory is copied directly.
#pragma once
#include "backend/backend.h"
#include "comm/comm.h"

namespace zero::comm {

class SelfComm final : public Comm {
 public:
  // `device` (not owned; may be null) copies tensors of its device; it must outlive this.
  explicit SelfComm(backend::Backend* device = nullptr) : device_(device) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "self"; }

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
  void abort_job(int) override {}

 private:
  void copy_bytes(Tensor& dst, const Tensor& src, const char* op);

  backend::Backend* device_;
};

}  // namespace zero::comm
