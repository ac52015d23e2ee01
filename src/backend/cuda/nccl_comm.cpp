#include "backend/cuda/nccl_comm.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/error.h"

// ncclCommSplit (NCCL 2.18), ncclGetLastError and ncclRemoteError (2.13).
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "NcclComm needs NCCL 2.18 or newer (ncclCommSplit): install a newer NCCL or build without it"
#endif

namespace zero::comm {

struct NcclComm::Handle {
  ncclComm_t comm = nullptr;  // null once aborted
};

namespace {

using backend::StreamKind;
using Clock = std::chrono::steady_clock;

// What went wrong and what to try, for a failed NCCL call.
std::string nccl_error_text(ncclResult_t result, const char* call) {
  std::string text = std::string("NCCL call ") + call + " failed: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && *detail != '\0') text += std::string(" (") + detail + ")";
  switch (result) {
    case ncclInvalidUsage:
      text += "; every rank must issue the same collectives in the same order with matching "
              "sizes, and ranks sharing one GPU must use HostStagedComm instead of NCCL";
      break;
    case ncclRemoteError:
      text += "; another rank failed or went away: see its log";
      break;
    case ncclUnhandledCudaError:
    case ncclSystemError:
      text += "; check the GPU, the driver and the network (nvidia-smi, NCCL_DEBUG=INFO)";
      break;
    default:
      text += "; run with NCCL_DEBUG=INFO for NCCL's own log";
      break;
  }
  return text;
}

void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) [[unlikely]]
    throw Error(nccl_error_text(result, call));
}

#define ZERO_NCCL_CHECK(call) check_nccl((call), #call)

// NCCL calls between ncclGroupStart and ncclGroupEnd: the group is always closed, and the first
// failure is thrown after it was.
class GroupCalls {
 public:
  GroupCalls() { ZERO_NCCL_CHECK(ncclGroupStart()); }
  ~GroupCalls() {
    if (!ended_) ncclGroupEnd();  // only reached while an exception unwinds
  }
  GroupCalls(const GroupCalls&) = delete;
  GroupCalls& operator=(const GroupCalls&) = delete;
  void add(ncclResult_t result, const char* call) {
    if (result != ncclSuccess && first_ == ncclSuccess) {
      first_ = result;
      call_ = call;
    }
  }
  void finish() {
    ended_ = true;
    const ncclResult_t end = ncclGroupEnd();
    if (first_ != ncclSuccess) throw Error(nccl_error_text(first_, call_));
    check_nccl(end, "ncclGroupEnd()");
  }

 private:
  ncclResult_t first_ = ncclSuccess;
  const char* call_ = "";
  bool ended_ = false;
};

ncclDataType_t nccl_type(const Tensor& t, const char* op) {
  switch (t.dtype()) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;  // 1-bit Adam's packed signs
    default: break;
  }
  throw UnsupportedError(std::string("NcclComm::") + op + ": " + dtype_name(t.dtype()) +
                         " tensors are not supported (f32, bf16, f16, f64, i32, i64 and u8 are)");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

int64_t share(int64_t bytes, int n) { return bytes * (n - 1) / n; }

// An asynchronous collective: complete when its event on the comm stream is. wait() makes the
// backend's current stream wait for that event (no host synchronisation) and releases the
// tensors it kept alive; destroying it unwaited does the same, so the memory is never reused
// while the collective may still touch it.
class NcclWork final : public Work {
 public:
  NcclWork(backend::CudaBackend& backend, backend::Event done, std::vector<Tensor> keep_alive,
           std::function<void(double)> on_wait)
      : backend_(backend),
        done_(std::move(done)),
        keep_alive_(std::move(keep_alive)),
        on_wait_(std::move(on_wait)),
        start_(Clock::now()) {}
  ~NcclWork() override {
    if (waited_) return;
    try {
      backend_.wait_event(backend_.current_stream(), done_);
    } catch (...) {
      // Never throw from a destructor; the failure surfaces at the next checked CUDA call.
    }
  }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  void wait() override {
    if (!waited_) {
      waited_ = true;
      try {
        backend_.wait_event(backend_.current_stream(), done_);
      } catch (...) {
        error_ = std::current_exception();
      }
      keep_alive_.clear();
      on_wait_(std::chrono::duration<double>(Clock::now() - start_).count());
    }
    if (error_) std::rethrow_exception(error_);
  }

  bool is_completed() override {
    if (error_) return true;
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(done_.native().get()));
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) return false;
    cudaGetLastError();  // the query's error is reported here, not by the next call
    error_ = std::make_exception_ptr(
        Error(std::string("NcclComm: the collective's completion event reports ") +
              cudaGetErrorString(status) + "; check the GPU (nvidia-smi) and the other ranks' logs"));
    return true;
  }

  std::exception_ptr error() override { return error_; }

 private:
  backend::CudaBackend& backend_;
  backend::Event done_;
  std::vector<Tensor> keep_alive_;
  std::function<void(double)> on_wait_;
  Clock::time_point start_;
  bool waited_ = false;
  std::exception_ptr error_;
};

// A host Comm's asynchronous call (host tensors): its seconds are counted when waited for.
class HostWork final : public Work {
 public:
  HostWork(std::shared_ptr<Work> inner, std::function<void(double)> on_wait)
      : inner_(std::move(inner)), on_wait_(std::move(on_wait)), start_(Clock::now()) {}
  void wait() override {
    if (counted_) {
      inner_->wait();
      return;
    }
    counted_ = true;
    const auto finish = [this] {
      on_wait_(std::chrono::duration<double>(Clock::now() - start_).count());
    };
    try {
      inner_->wait();
    } catch (...) {
      finish();
      throw;
    }
    finish();
  }
  bool is_completed() override { return inner_->is_completed(); }
  std::exception_ptr error() override { return inner_->error(); }

 private:
  std::shared_ptr<Work> inner_;
  std::function<void(double)> on_wait_;
  Clock::time_point start_;
  bool counted_ = false;
};

}  // namespace

int local_rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const char* end = value + std::strlen(value);
    int rank = -1;
    const auto [last, failure] = std::from_chars(value, end, rank);
    if (value == end || failure != std::errc() || last != end || rank < 0) {
      throw ConfigError(std::string(name) + "=\"" + value +
                        "\" is not a local rank (a non-negative integer); fix the launcher's "
                        "environment or unset it");
    }
    return rank;
  }
  return 0;
}

NcclComm::NcclComm(Comm& host, backend::CudaBackend& backend)
    : handle_(std::make_unique<Handle>()),
      host_(host),
      backend_(backend),
      rank_(host.rank()),
      size_(host.world_size()) {
  // Byte 0 says whether rank 0 created the id, so a failure there reaches every rank instead of
  // leaving them in ncclCommInitRank with garbage.
  ncclUniqueId id{};
  constexpr auto kIdBytes = static_cast<int64_t>(sizeof(ncclUniqueId));
  Tensor message = Tensor::zeros_host({kIdBytes + 1}, DType::kU8, MemoryCategory::kComm);
  auto* bytes = static_cast<uint8_t*>(message.raw_data());
  std::string failure;
  if (rank_ == 0) {
    const ncclResult_t created = ncclGetUniqueId(&id);
    if (created == ncclSuccess) {
      bytes[0] = 1;
      std::memcpy(bytes + 1, &id, sizeof(id));
    } else {
      failure = nccl_error_text(created, "ncclGetUniqueId(&id)");
    }
  }
  host_.broadcast(message, 0);
  if (!failure.empty()) throw Error(failure);
  if (bytes[0] != 1) {
    throw Error("NcclComm: rank 0 could not create the NCCL unique id (its log says why); "
                "every rank gives up");
  }
  std::memcpy(&id, bytes + 1, sizeof(id));
  ZERO_CUDA_CHECK(cudaSetDevice(backend_.device().index));
  ZERO_NCCL_CHECK(ncclCommInitRank(&handle_->comm, size_, id, rank_));
  watch_for_async_errors();
}

namespace {

// The host-wait check (CudaBackend::add_host_wait_check): a failure NCCL found on its own - a
// peer rank died, the network broke - while the host waits for work behind a collective that can
// then never finish. Aborts the communicator (its kernels return) and throws.
void check_async_error(NcclComm::Handle& handle, int rank, int size) {
  if (handle.comm == nullptr) return;
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(handle.comm, &async) != ncclSuccess) return;  // cannot tell: wait on
  if (async == ncclSuccess || async == ncclInProgress) return;
  ncclCommAbort(handle.comm);
  handle.comm = nullptr;
  throw Error("NcclComm (rank " + std::to_string(rank) + " of " + std::to_string(size) +
              "): NCCL reported a failure while the host waited for the GPU, so the pending "
              "collectives can never finish and the communicator was aborted - " +
              nccl_error_text(async, "(an asynchronous error)"));
}

}  // namespace

void NcclComm::watch_for_async_errors() {
  check_id_ = backend_.add_host_wait_check(
      [handle = handle_.get(), rank = rank_, size = size_] { check_async_error(*handle, rank, size); });
}

NcclComm::NcclComm(std::unique_ptr<Handle> handle, std::unique_ptr<Comm> host,
                   backend::CudaBackend& backend)
    : handle_(std::move(handle)), owned_host_(std::move(host)), host_(*owned_host_), backend_(backend) {
  ZERO_NCCL_CHECK(ncclCommUserRank(handle_->comm, &rank_));
  ZERO_NCCL_CHECK(ncclCommCount(handle_->comm, &size_));
  ZERO_CHECK(host_.rank() == rank_ && host_.world_size() == size_,
             "NcclComm::split: the NCCL group (rank " << rank_ << " of " << size_
                                                      << ") and the host group (rank " << host_.rank()
                                                      << " of " << host_.world_size() << ") disagree");
  watch_for_async_errors();
}

NcclComm::~NcclComm() {
  if (check_id_ != 0) backend_.remove_host_wait_check(check_id_);
  barrier_scratch_ = Tensor();
  if (handle_ && handle_->comm != nullptr) {
    // Best effort at teardown; never throw from a destructor. While an exception unwinds (this
    // rank failed), abort: ncclCommDestroy first waits for the communicator's work and, in
    // current NCCL, for the other ranks of this host - ranks that are themselves waiting for this
    // one, so the job would hang before the failure reached MPI_Abort and its message.
    if (std::uncaught_exceptions() > 0) {
      ncclCommAbort(handle_->comm);
    } else {
      ncclCommDestroy(handle_->comm);
    }
    handle_->comm = nullptr;
  }
}

std::string NcclComm::name() const {
  return "nccl(rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " on " +
         backend_.device().to_string() + ")";
}

bool NcclComm::host_call(std::initializer_list<const Tensor*> tensors, const char* op) const {
  size_t on_host = 0;
  for (const Tensor* t : tensors) {
    ZERO_CHECK(t->defined() && t->is_contiguous(), "NcclComm::" << op << ": needs contiguous tensors, got "
                                                                << (t->defined() ? t->describe() : "none"));
    if (t->device().is_cpu()) {
      ++on_host;
      continue;
    }
    ZERO_CHECK(t->device() == backend_.device(), "NcclComm::" << op << ": tensors of "
                                                              << backend_.device().to_string()
                                                              << " or the host only, got " << t->describe());
  }
  ZERO_CHECK(on_host == 0 || on_host == tensors.size(),
             "NcclComm::" << op << ": the tensors of one call must all be on the host or all on "
                          << backend_.device().to_string());
  return on_host > 0;
}

void NcclComm::count(OpKind kind, int64_t message_bytes, int64_t traffic_bytes) {
  OpStats& s = stats_.at(kind);
  ++s.calls;
  s.message_bytes += message_bytes;
  s.traffic_bytes += traffic_bytes;
}

void NcclComm::run_on_host(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                           const std::function<void()>& call) {
  const auto start = Clock::now();
  call();
  count(kind, message_bytes, traffic_bytes);
  stats_.at(kind).seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

std::shared_ptr<Work> NcclComm::issue_on_host(OpKind kind, int64_t message_bytes,
                                              int64_t traffic_bytes, std::shared_ptr<Work> work) {
  count(kind, message_bytes, traffic_bytes);
  return std::make_shared<HostWork>(std::move(work),
                                    [this, kind](double s) { stats_.at(kind).seconds += s; });
}

backend::Event NcclComm::launch(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                                const char* op, const std::function<void()>& enqueue) {
  ZERO_CHECK(handle_->comm != nullptr,
             "NcclComm::" << op << ": the communicator was aborted (abort_job); create a new one");
  const backend::Event ready = backend_.record_event(backend_.current_stream());
  backend_.wait_event(StreamKind::kComm, ready);
  enqueue();
  backend::Event done = backend_.record_event(StreamKind::kComm);
  count(kind, message_bytes, traffic_bytes);
  return done;
}

void NcclComm::launch_blocking(OpKind kind, int64_t message_bytes, int64_t traffic_bytes,
                               const char* op, const std::function<void()>& enqueue) {
  const auto start = Clock::now();
  const backend::Event done = launch(kind, message_bytes, traffic_bytes, op, enqueue);
  backend_.wait_event(backend_.current_stream(), done);
  stats_.at(kind).seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

std::shared_ptr<Work> NcclComm::all_reduce_async(Tensor& tensor, ReduceOp op) {
  const auto bytes = static_cast<int64_t>(tensor.nbytes());
  const int64_t traffic = 2 * share(bytes, size_);
  if (host_call({&tensor}, "all_reduce")) {
    return issue_on_host(OpKind::kAllReduce, bytes, traffic, host_.all_reduce_async(tensor, op));
  }
  const ncclDataType_t type = nccl_type(tensor, "all_reduce");
  backend::Event done = launch(OpKind::kAllReduce, bytes, traffic, "all_reduce", [&] {
    ZERO_NCCL_CHECK(ncclAllReduce(tensor.raw_data(), tensor.raw_data(),
                                  static_cast<size_t>(tensor.numel()), type, nccl_op(op),
                                  handle_->comm, backend_.stream(StreamKind::kComm)));
  });
  return std::make_shared<NcclWork>(backend_, std::move(done), std::vector<Tensor>{tensor},
                                    [this](double s) { stats_.at(OpKind::kAllReduce).seconds += s; });
}

void NcclComm::all_reduce(Tensor& tensor, ReduceOp op) {
  const auto bytes = static_cast<int64_t>(tensor.nbytes());
  const int64_t traffic = 2 * share(bytes, size_);
  if (host_call({&tensor}, "all_reduce")) {
    run_on_host(OpKind::kAllReduce, bytes, traffic, [&] { host_.all_reduce(tensor, op); });
    return;
  }
  const ncclDataType_t type = nccl_type(tensor, "all_reduce");
  launch_blocking(OpKind::kAllReduce, bytes, traffic, "all_reduce", [&] {
    ZERO_NCCL_CHECK(ncclAllReduce(tensor.raw_data(), tensor.raw_data(),
                                  static_cast<size_t>(tensor.numel()), type, nccl_op(op),
                                  handle_->comm, backend_.stream(StreamKind::kComm)));
  });
}

namespace {

void check_reduce_scatter(const Tensor& input, const Tensor& output, int n) {
  ZERO_CHECK(input.dtype() == output.dtype() && input.numel() == output.numel() * n,
             "NcclComm::reduce_scatter: input " << input.describe() << " must hold " << n
                                                << " chunks of output " << output.describe());
}

void check_all_gather(const Tensor& input, const Tensor& output, int n) {
  ZERO_CHECK(input.dtype() == output.dtype() && output.numel() == input.numel() * n,
             "NcclComm::all_gather: output " << output.describe() << " must hold " << n
                                             << " copies of input " << input.describe());
}

}  // namespace

std::shared_ptr<Work> NcclComm::reduce_scatter_async(const Tensor& input, Tensor& output,
                                                     ReduceOp op) {
  const bool on_host = host_call({&input, &output}, "reduce_scatter");
  check_reduce_scatter(input, output, size_);
  const auto bytes = static_cast<int64_t>(input.nbytes());
  if (on_host) {
    return issue_on_host(OpKind::kReduceScatter, bytes, share(bytes, size_),
                         host_.reduce_scatter_async(input, output, op));
  }
  const ncclDataType_t type = nccl_type(input, "reduce_scatter");
  backend::Event done =
      launch(OpKind::kReduceScatter, bytes, share(bytes, size_), "reduce_scatter", [&] {
        ZERO_NCCL_CHECK(ncclReduceScatter(input.raw_data(), output.raw_data(),
                                          static_cast<size_t>(output.numel()), type, nccl_op(op),
                                          handle_->comm, backend_.stream(StreamKind::kComm)));
      });
  return std::make_shared<NcclWork>(
      backend_, std::move(done), std::vector<Tensor>{input, output},
      [this](double s) { stats_.at(OpKind::kReduceScatter).seconds += s; });
}

void NcclComm::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  const bool on_host = host_call({&input, &output}, "reduce_scatter");
  check_reduce_scatter(input, output, size_);
  const auto bytes = static_cast<int64_t>(input.nbytes());
  if (on_host) {
    run_on_host(OpKind::kReduceScatter, bytes, share(bytes, size_),
                [&] { host_.reduce_scatter(input, output, op); });
    return;
  }
  const ncclDataType_t type = nccl_type(input, "reduce_scatter");
  launch_blocking(OpKind::kReduceScatter, bytes, share(bytes, size_), "reduce_scatter", [&] {
    ZERO_NCCL_CHECK(ncclReduceScatter(input.raw_data(), output.raw_data(),
                                      static_cast<size_t>(output.numel()), type, nccl_op(op),
                                      handle_->comm, backend_.stream(StreamKind::kComm)));
  });
}

std::shared_ptr<Work> NcclComm::all_gather_async(const Tensor& input, Tensor& output) {
  const bool on_host = host_call({&input, &output}, "all_gather");
  check_all_gather(input, output, size_);
  const auto bytes = static_cast<int64_t>(output.nbytes());
  if (on_host) {
    return issue_on_host(OpKind::kAllGather, bytes, share(bytes, size_),
                         host_.all_gather_async(input, output));
  }
  const ncclDataType_t type = nccl_type(input, "all_gather");
  // In place when `input` is this rank's slice of `output` (NCCL detects it from the pointers).
  backend::Event done = launch(OpKind::kAllGather, bytes, share(bytes, size_), "all_gather", [&] {
    ZERO_NCCL_CHECK(ncclAllGather(input.raw_data(), output.raw_data(),
                                  static_cast<size_t>(input.numel()), type, handle_->comm,
                                  backend_.stream(StreamKind::kComm)));
  });
  return std::make_shared<NcclWork>(backend_, std::move(done), std::vector<Tensor>{input, output},
                                    [this](double s) { stats_.at(OpKind::kAllGather).seconds += s; });
}

void NcclComm::all_gather(const Tensor& input, Tensor& output) {
  const bool on_host = host_call({&input, &output}, "all_gather");
  check_all_gather(input, output, size_);
  const auto bytes = static_cast<int64_t>(output.nbytes());
  if (on_host) {
    run_on_host(OpKind::kAllGather, bytes, share(bytes, size_),
                [&] { host_.all_gather(input, output); });
    return;
  }
  const ncclDataType_t type = nccl_type(input, "all_gather");
  launch_blocking(OpKind::kAllGather, bytes, share(bytes, size_), "all_gather", [&] {
    ZERO_NCCL_CHECK(ncclAllGather(input.raw_data(), output.raw_data(),
                                  static_cast<size_t>(input.numel()), type, handle_->comm,
                                  backend_.stream(StreamKind::kComm)));
  });
}

void NcclComm::all_to_all(const Tensor& input, Tensor& output) {
  const bool on_host = host_call({&input, &output}, "all_to_all");
  ZERO_CHECK(input.dtype() == output.dtype() && input.numel() == output.numel() &&
                 input.numel() % size_ == 0,
             "NcclComm::all_to_all: " << input.describe() << " -> " << output.describe()
                                      << " must be equal and divisible by " << size_);
  const auto bytes = static_cast<int64_t>(input.nbytes());
  if (on_host) {
    run_on_host(OpKind::kAllToAll, bytes, share(bytes, size_),
                [&] { host_.all_to_all(input, output); });
    return;
  }
  const ncclDataType_t type = nccl_type(input, "all_to_all");
  const auto count = static_cast<size_t>(input.numel() / size_);
  const size_t chunk_bytes = count * input.element_size();
  launch_blocking(OpKind::kAllToAll, bytes, share(bytes, size_), "all_to_all", [&] {
    const cudaStream_t stream = backend_.stream(StreamKind::kComm);
    const auto* in = static_cast<const char*>(input.raw_data());
    auto* out = static_cast<char*>(output.raw_data());
    // The own chunk is a device copy; the others are one grouped send/recv per peer.
    ZERO_CUDA_CHECK(cudaMemcpyAsync(out + chunk_bytes * static_cast<size_t>(rank_),
                                    in + chunk_bytes * static_cast<size_t>(rank_), chunk_bytes,
                                    cudaMemcpyDeviceToDevice, stream));
    if (size_ == 1) return;
    GroupCalls group;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const size_t offset = chunk_bytes * static_cast<size_t>(peer);
      group.add(ncclSend(in + offset, count, type, peer, handle_->comm, stream), "ncclSend");
      group.add(ncclRecv(out + offset, count, type, peer, handle_->comm, stream), "ncclRecv");
    }
    group.finish();
  });
}

void NcclComm::broadcast(Tensor& tensor, int root) {
  const bool on_host = host_call({&tensor}, "broadcast");
  ZERO_CHECK(root >= 0 && root < size_, "NcclComm::broadcast: root " << root << " of " << size_);
  const auto bytes = static_cast<int64_t>(tensor.nbytes());
  const int64_t traffic = rank_ == root ? bytes : 0;
  if (on_host) {
    run_on_host(OpKind::kBroadcast, bytes, traffic, [&] { host_.broadcast(tensor, root); });
    return;
  }
  const ncclDataType_t type = nccl_type(tensor, "broadcast");
  launch_blocking(OpKind::kBroadcast, bytes, traffic, "broadcast", [&] {
    ZERO_NCCL_CHECK(ncclBroadcast(tensor.raw_data(), tensor.raw_data(),
                                  static_cast<size_t>(tensor.numel()), type, root, handle_->comm,
                                  backend_.stream(StreamKind::kComm)));
  });
}

void NcclComm::send(const Tensor& tensor, int dest, int tag) {
  const bool on_host = host_call({&tensor}, "send");
  ZERO_CHECK(dest >= 0 && dest < size_ && dest != rank_, "NcclComm::send: bad destination " << dest);
  const auto bytes = static_cast<int64_t>(tensor.nbytes());
  if (on_host) {
    run_on_host(OpKind::kSend, bytes, bytes, [&] { host_.send(tensor, dest, tag); });
    return;
  }
  const ncclDataType_t type = nccl_type(tensor, "send");
  launch_blocking(OpKind::kSend, bytes, bytes, "send", [&] {
    GroupCalls group;
    group.add(ncclSend(tensor.raw_data(), static_cast<size_t>(tensor.numel()), type, dest,
                       handle_->comm, backend_.stream(StreamKind::kComm)),
              "ncclSend");
    group.finish();
  });
}

void NcclComm::recv(Tensor& tensor, int source, int tag) {
  const bool on_host = host_call({&tensor}, "recv");
  ZERO_CHECK(source >= 0 && source < size_ && source != rank_, "NcclComm::recv: bad source " << source);
  const auto bytes = static_cast<int64_t>(tensor.nbytes());
  if (on_host) {
    run_on_host(OpKind::kRecv, bytes, 0, [&] { host_.recv(tensor, source, tag); });
    return;
  }
  const ncclDataType_t type = nccl_type(tensor, "recv");
  launch_blocking(OpKind::kRecv, bytes, 0, "recv", [&] {
    GroupCalls group;
    group.add(ncclRecv(tensor.raw_data(), static_cast<size_t>(tensor.numel()), type, source,
                       handle_->comm, backend_.stream(StreamKind::kComm)),
              "ncclRecv");
    group.finish();
  });
}

void NcclComm::barrier() {
  // NCCL has no barrier: a one-element all-reduce, then the host waits for it.
  if (!barrier_scratch_.defined()) {
    barrier_scratch_ = Tensor::empty(backend_.allocator(), {1}, DType::kI32, MemoryCategory::kComm);
  }
  const auto start = Clock::now();
  const backend::Event done = launch(OpKind::kBarrier, 0, 0, "barrier", [&] {
    const cudaStream_t stream = backend_.stream(StreamKind::kComm);
    ZERO_CUDA_CHECK(cudaMemsetAsync(barrier_scratch_.raw_data(), 0, barrier_scratch_.nbytes(), stream));
    ZERO_NCCL_CHECK(ncclAllReduce(barrier_scratch_.raw_data(), barrier_scratch_.raw_data(), 1,
                                  ncclInt32, ncclSum, handle_->comm, stream));
  });
  backend_.synchronize_event(done);
  backend_.wait_event(backend_.current_stream(), done);
  stats_.at(OpKind::kBarrier).seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Comm> NcclComm::split(int color, int key) {
  ZERO_CHECK(color >= 0, "NcclComm::split: color " << color << " must be >= 0");
  ZERO_CHECK(handle_->comm != nullptr,
             "NcclComm::split: the communicator was aborted (abort_job); create a new one");
  // Both splits are collective over this group; every rank makes them in the same order.
  std::unique_ptr<Comm> host_group = host_.split(color, key);
  auto child = std::make_unique<Handle>();
  ZERO_NCCL_CHECK(ncclCommSplit(handle_->comm, color, key, &child->comm, nullptr));
  return std::unique_ptr<Comm>(new NcclComm(std::move(child), std::move(host_group), backend_));
}

void NcclComm::abort_job(int code) {
  if (handle_->comm != nullptr) {
    ncclCommAbort(handle_->comm);  // best effort: the job is going down either way
    handle_->comm = nullptr;
  }
  host_.abort_job(code);
}

}  // namespace zero::comm
