#include "comm/self_comm.h"

#include <cstring>

#include "core/check.h"
#include "core/error.h"

namespace zero::comm {
namespace {

void count(CommStats& stats, OpKind kind, const Tensor& message) {
  OpStats& s = stats.at(kind);
  ++s.calls;
  s.message_bytes += static_cast<int64_t>(message.nbytes());
}

// Memory the host can move with memmove: host memory, and the simulated device's (which is host
// memory by construction).
bool host_addressable(const Tensor& t) {
  return t.device().is_cpu() || t.device().kind == DeviceKind::kSimulated;
}

}  // namespace

// A copy between two contiguous tensors of the same dtype and size (may alias exactly).
void SelfComm::copy_bytes(Tensor& dst, const Tensor& src, const char* op) {
  ZERO_CHECK(dst.is_contiguous() && src.is_contiguous(), "SelfComm::" << op << ": tensors must be contiguous");
  ZERO_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(),
             "SelfComm::" << op << ": " << dst.describe() << " vs " << src.describe());
  if (dst.raw_data() == src.raw_data()) return;
  if (host_addressable(dst) && host_addressable(src)) {
    std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  ZERO_CHECK(device_ != nullptr && dst.device() == device_->device() && src.device() == dst.device(),
             "SelfComm::" << op << " of " << src.describe() << " into " << dst.describe()
                          << ": device tensors need the SelfComm built with their backend");
  device_->copy(dst, src);
}

void SelfComm::all_reduce(Tensor& tensor, ReduceOp) { count(stats_, OpKind::kAllReduce, tensor); }

void SelfComm::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp) {
  count(stats_, OpKind::kReduceScatter, input);
  copy_bytes(output, input, "reduce_scatter");
}

void SelfComm::all_gather(const Tensor& input, Tensor& output) {
  count(stats_, OpKind::kAllGather, output);
  copy_bytes(output, input, "all_gather");
}

void SelfComm::all_to_all(const Tensor& input, Tensor& output) {
  count(stats_, OpKind::kAllToAll, input);
  copy_bytes(output, input, "all_to_all");
}

void SelfComm::broadcast(Tensor& tensor, int root) {
  ZERO_CHECK(root == 0, "broadcast root " << root << " in a group of one");
  count(stats_, OpKind::kBroadcast, tensor);
}

void SelfComm::send(const Tensor&, int dest, int) {
  throw Error("send to rank " + std::to_string(dest) + " in a group of one process");
}

void SelfComm::recv(Tensor&, int source, int) {
  throw Error("recv from rank " + std::to_string(source) + " in a group of one process");
}

void SelfComm::barrier() { ++stats_.at(OpKind::kBarrier).calls; }

std::shared_ptr<Work> SelfComm::all_reduce_async(Tensor& tensor, ReduceOp op) {
  all_reduce(tensor, op);
  return std::make_shared<CompletedWork>();
}

std::shared_ptr<Work> SelfComm::reduce_scatter_async(const Tensor& input, Tensor& output,
                                                     ReduceOp op) {
  reduce_scatter(input, output, op);
  return std::make_shared<CompletedWork>();
}

std::shared_ptr<Work> SelfComm::all_gather_async(const Tensor& input, Tensor& output) {
  all_gather(input, output);
  return std::make_shared<CompletedWork>();
}

std::unique_ptr<Comm> SelfComm::split(int, int) { return std::make_unique<SelfComm>(device_); }

}  // namespace zero::comm
