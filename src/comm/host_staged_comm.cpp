#include "comm/host_staged_comm.h"

#include "core/check.h"

namespace zero::comm {
namespace {

bool on_host(const Tensor& t) { return !t.defined() || t.device().is_cpu(); }

// Completes the wrapped host collective, then copies its result to the device tensor.
class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<Work> inner, backend::Backend& backend, Tensor device, Tensor staged,
             Tensor keep_alive)
      : inner_(std::move(inner)),
        backend_(backend),
        device_(std::move(device)),
        staged_(std::move(staged)),
        keep_alive_(std::move(keep_alive)) {}
  void wait() override {
    inner_->wait();
    if (!copied_) {
      copied_ = true;
      if (device_.defined() && !on_host(device_)) backend_.copy_from_host(device_, staged_.raw_data());
      staged_ = keep_alive_ = Tensor();
    }
  }
  bool is_completed() override { return inner_->is_completed(); }
  std::exception_ptr error() override { return inner_->error(); }

 private:
  std::shared_ptr<Work> inner_;
  backend::Backend& backend_;
  Tensor device_;
  Tensor staged_;
  Tensor keep_alive_;  // the staged input of the collective, alive until it completed
  bool copied_ = false;
};

}  // namespace

HostStagedComm::HostStagedComm(Comm& inner, backend::Backend& backend)
    : inner_(inner), backend_(backend) {}

HostStagedComm::HostStagedComm(std::unique_ptr<Comm> owned_inner, backend::Backend& backend)
    : owned_(std::move(owned_inner)), inner_(*owned_), backend_(backend) {}

Tensor HostStagedComm::staged_like(const Tensor& t) {
  if (on_host(t)) return t;
  ZERO_CHECK(t.is_contiguous(), "HostStagedComm: " << t.describe() << " is not contiguous");
  return Tensor::empty(backend_.pinned_host_allocator(), t.shape(), t.dtype(), MemoryCategory::kComm);
}

Tensor HostStagedComm::staged_copy(const Tensor& t) {
  Tensor staged = staged_like(t);
  if (staged.storage() != t.storage()) backend_.copy_to_host(staged.raw_data(), t);
  return staged;
}

void HostStagedComm::unstage(Tensor& t, const Tensor& staged) {
  if (staged.storage() != t.storage()) backend_.copy_from_host(t, staged.raw_data());
}

void HostStagedComm::all_reduce(Tensor& tensor, ReduceOp op) {
  Tensor staged = staged_copy(tensor);
  inner_.all_reduce(staged, op);
  mirror_stats();
  unstage(tensor, staged);
}

void HostStagedComm::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  const Tensor staged_in = staged_copy(input);
  Tensor staged_out = staged_like(output);
  inner_.reduce_scatter(staged_in, staged_out, op);
  mirror_stats();
  unstage(output, staged_out);
}

void HostStagedComm::all_gather(const Tensor& input, Tensor& output) {
  // The input may be a slice of the output: stage it separately, so the host buffers never
  // alias and the wrapped Comm sees an ordinary out-of-place gather.
  const Tensor staged_in = staged_copy(input);
  Tensor staged_out = staged_like(output);
  inner_.all_gather(staged_in, staged_out);
  mirror_stats();
  unstage(output, staged_out);
}

void HostStagedComm::all_to_all(const Tensor& input, Tensor& output) {
  const Tensor staged_in = staged_copy(input);
  Tensor staged_out = staged_like(output);
  inner_.all_to_all(staged_in, staged_out);
  mirror_stats();
  unstage(output, staged_out);
}

void HostStagedComm::broadcast(Tensor& tensor, int root) {
  Tensor staged = staged_copy(tensor);
  inner_.broadcast(staged, root);
  mirror_stats();
  unstage(tensor, staged);
}

void HostStagedComm::send(const Tensor& tensor, int dest, int tag) {
  inner_.send(staged_copy(tensor), dest, tag);
  mirror_stats();
}

void HostStagedComm::recv(Tensor& tensor, int source, int tag) {
  Tensor staged = staged_like(tensor);
  inner_.recv(staged, source, tag);
  mirror_stats();
  unstage(tensor, staged);
}

void HostStagedComm::barrier() {
  inner_.barrier();
  mirror_stats();
}

std::shared_ptr<Work> HostStagedComm::all_reduce_async(Tensor& tensor, ReduceOp op) {
  Tensor staged = staged_copy(tensor);
  auto work = inner_.all_reduce_async(staged, op);
  mirror_stats();
  return std::make_shared<StagedWork>(std::move(work), backend_, tensor, staged, Tensor());
}

std::shared_ptr<Work> HostStagedComm::reduce_scatter_async(const Tensor& input, Tensor& output,
                                                           ReduceOp op) {
  Tensor staged_in = staged_copy(input);
  Tensor staged_out = staged_like(output);
  auto work = inner_.reduce_scatter_async(staged_in, staged_out, op);
  mirror_stats();
  return std::make_shared<StagedWork>(std::move(work), backend_, output, staged_out, staged_in);
}

std::shared_ptr<Work> HostStagedComm::all_gather_async(const Tensor& input, Tensor& output) {
  Tensor staged_in = staged_copy(input);
  Tensor staged_out = staged_like(output);
  auto work = inner_.all_gather_async(staged_in, staged_out);
  mirror_stats();
  return std::make_shared<StagedWork>(std::move(work), backend_, output, staged_out, staged_in);
}

std::unique_ptr<Comm> HostStagedComm::split(int color, int key) {
  return std::make_unique<HostStagedComm>(inner_.split(color, key), backend_);
}

}  // namespace zero::comm
