// NCCL for the simulated device, at world size 1: what NcclComm calls, with NCCL's argument
// checks and stream semantics (each operation enqueued on its stream, include/cuda_sim/streams.h).
// With one rank every collective moves the rank's own data: all-reduce, broadcast, all-gather
// and reduce-scatter copy send to receive (in place when the buffers are one), and a send to
// oneself is matched to the receive from oneself in issue order. A communicator of more ranks is
// refused with ncclInvalidUsage and a message: the simulator runs one process per device and
// cannot progress another process's streams.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "cuda_sim/nccl_faults.h"
#include "device_memory.h"
#include "runtime_state.h"

struct ncclComm {
  bool aborted = false;
  ncclResult_t async_error = ncclSuccess;  // what ncclCommGetAsyncError reports
  cuda_sim::StreamPoint gate = cuda_sim::new_gate();  // hung operations wait here until abort
  // Sends to oneself not yet matched by a receive, and receives waiting for a send (issue order).
  struct Message {
    const void* send = nullptr;
    void* recv = nullptr;
    size_t bytes = 0;
    cudaStream_t stream = nullptr;
  };
  std::deque<Message> unmatched_sends;
  std::deque<Message> unmatched_recvs;
};

namespace cuda_sim {
namespace {

constexpr char kIdMagic[] = "zero.cpp cuda_sim nccl";

bool g_fail_next = false;  // nccl_fail_next_collective()

// A collective that nccl_fail_next_collective() chose to fail: its stream hangs at the comm's
// gate and the comm reports the peer's loss.
void hang_if_failing(ncclComm& comm, cudaStream_t stream) {
  if (!g_fail_next) return;
  g_fail_next = false;
  comm.async_error = ncclRemoteError;
  enqueue_wait(stream, comm.gate);
}

std::mutex& last_error_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::string& last_error() {
  static std::string text;
  return text;
}

ncclResult_t refuse(ncclResult_t result, const std::string& why) {
  std::fprintf(stderr, "cuda_sim nccl: %s\n", why.c_str());
  std::lock_guard lock(last_error_mutex());
  last_error() = why;
  return result;
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// The checks NCCL makes of one buffer argument: device (or pinned) memory holding `bytes`.
bool device_buffer(const void* pointer, size_t bytes) {
  if (bytes == 0) return true;
  const auto allocation = find_allocation(pointer);
  return allocation &&
         reinterpret_cast<uintptr_t>(pointer) + bytes <= allocation->begin + allocation->bytes;
}

ncclResult_t check_call(const char* call, ncclComm_t comm, cudaStream_t stream,
                        ncclDataType_t type) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, std::string(call) + ": null comm");
  if (comm->aborted) return refuse(ncclInvalidUsage, std::string(call) + ": aborted comm");
  if (!is_known_stream(stream)) return refuse(ncclInvalidArgument, std::string(call) + ": stream");
  if (type_bytes(type) == 0) return refuse(ncclInvalidArgument, std::string(call) + ": datatype");
  return ncclSuccess;
}

// Enqueues the one-rank data movement: recv = send (nothing when they are the same memory).
ncclResult_t enqueue_copy(ncclComm& comm, const char* call, const void* send, void* recv,
                          size_t bytes, cudaStream_t stream) {
  hang_if_failing(comm, stream);
  if (!device_buffer(send, bytes) || !device_buffer(recv, bytes)) {
    return refuse(ncclInvalidArgument,
                  std::string(call) + ": a buffer is not " + std::to_string(bytes) +
                      " bytes of device memory");
  }
  if (bytes != 0 && send != recv) {
    enqueue(stream, [send, recv, bytes] { std::memmove(recv, send, bytes); });
  }
  return ncclSuccess;
}

void match_messages(ncclComm& comm) {
  while (!comm.unmatched_sends.empty() && !comm.unmatched_recvs.empty()) {
    const ncclComm::Message send = comm.unmatched_sends.front();
    const ncclComm::Message recv = comm.unmatched_recvs.front();
    comm.unmatched_sends.pop_front();
    comm.unmatched_recvs.pop_front();
    // The copy runs on the receiver's stream once the sender's stream reached the send.
    if (send.stream != recv.stream) enqueue_wait(recv.stream, end_of(send.stream));
    if (send.bytes != 0) {
      enqueue(recv.stream, [from = send.send, to = recv.recv, n = send.bytes] {
        std::memmove(to, from, n);
      });
    }
  }
}

}  // namespace

void nccl_fail_next_collective() { g_fail_next = true; }

}  // namespace cuda_sim

using namespace cuda_sim;

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "unknown result code (cuda_sim nccl)";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  std::lock_guard lock(last_error_mutex());
  return last_error().c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return refuse(ncclInvalidArgument, "ncclGetUniqueId: null id");
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, "ncclCommInitRank: null comm");
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) {
    return refuse(ncclInvalidArgument, "ncclCommInitRank: the id is not from ncclGetUniqueId");
  }
  if (nranks != 1 || rank != 0) {
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: the simulator's NCCL has one rank only (asked for rank " +
                      std::to_string(rank) + " of " + std::to_string(nranks) + ")");
  }
  *comm = new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int /*key*/, ncclComm_t* newcomm,
                           ncclConfig_t* /*config*/) {
  if (comm == nullptr || newcomm == nullptr) {
    return refuse(ncclInvalidArgument, "ncclCommSplit: null comm");
  }
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return refuse(ncclInvalidArgument, "ncclCommCount");
  *count = 1;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return refuse(ncclInvalidArgument, "ncclCommUserRank");
  *rank = 0;
  return ncclSuccess;
}

// Destroy waits for the communicator's queued operations (NCCL flushes them; a hung one would
// hang it, which the simulator turns into an abort); abort releases hung operations at once.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  open_gate(comm->gate);
  run_all();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  open_gate(comm->gate);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) {
    return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  }
  *async_error = comm->async_error;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (const auto r = check_call("ncclAllReduce", comm, stream, type); r != ncclSuccess) return r;
  if (op < ncclSum || op >= ncclNumOps) return refuse(ncclInvalidArgument, "ncclAllReduce: op");
  return enqueue_copy(*comm, "ncclAllReduce", send, recv, count * type_bytes(type), stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (const auto r = check_call("ncclReduceScatter", comm, stream, type); r != ncclSuccess) {
    return r;
  }
  if (op < ncclSum || op >= ncclNumOps) {
    return refuse(ncclInvalidArgument, "ncclReduceScatter: op");
  }
  return enqueue_copy(*comm, "ncclReduceScatter", send, recv, recvcount * type_bytes(type),
                      stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  if (const auto r = check_call("ncclAllGather", comm, stream, type); r != ncclSuccess) return r;
  return enqueue_copy(*comm, "ncclAllGather", send, recv, sendcount * type_bytes(type), stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  if (const auto r = check_call("ncclBroadcast", comm, stream, type); r != ncclSuccess) return r;
  if (root != 0) return refuse(ncclInvalidArgument, "ncclBroadcast: root is not a rank");
  return enqueue_copy(*comm, "ncclBroadcast", send, recv, count * type_bytes(type), stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (const auto r = check_call("ncclSend", comm, stream, type); r != ncclSuccess) return r;
  if (peer != 0) return refuse(ncclInvalidArgument, "ncclSend: peer is not a rank");
  const size_t bytes = count * type_bytes(type);
  if (!device_buffer(send, bytes)) return refuse(ncclInvalidArgument, "ncclSend: buffer");
  hang_if_failing(*comm, stream);
  comm->unmatched_sends.push_back({send, nullptr, bytes, stream});
  match_messages(*comm);
  return ncclSuccess;
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (const auto r = check_call("ncclRecv", comm, stream, type); r != ncclSuccess) return r;
  if (peer != 0) return refuse(ncclInvalidArgument, "ncclRecv: peer is not a rank");
  const size_t bytes = count * type_bytes(type);
  if (!device_buffer(recv, bytes)) return refuse(ncclInvalidArgument, "ncclRecv: buffer");
  if (!comm->unmatched_sends.empty() && comm->unmatched_sends.front().bytes != bytes) {
    return refuse(ncclInvalidUsage, "ncclRecv: size differs from the matching send's");
  }
  hang_if_failing(*comm, stream);
  comm->unmatched_recvs.push_back({nullptr, recv, bytes, stream});
  match_messages(*comm);
  return ncclSuccess;
}
