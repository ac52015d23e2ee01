// Streams and events: how a device backend orders work. Every op a Backend enqueues goes on its
// current stream (StreamKind::kCompute unless a StreamGuard selects another). Work on different
// streams may overlap; an Event recorded on one stream and waited on by another orders them, the
// way ZeRO's prefetch all-gathers (comm stream) must finish before the layer that reads them
// (compute stream) starts. The CPU backend runs every op synchronously, so its events are
// complete as soon as they are recorded; the interface is what layers write against.
#pragma once
#include <cstdint>
#include <memory>

namespace zero::backend {

enum class StreamKind : int {
  kCompute = 0,  // kernels of the forward, backward and optimizer step
  kComm,         // collectives (NcclComm enqueues here)
  kTransfer,     // host <-> device copies (batches, offload)
};
inline constexpr int kNumStreamKinds = 3;
const char* stream_kind_name(StreamKind kind);

// A point in one stream's work. Copyable; a default-constructed Event is complete.
class Event {
 public:
  Event() = default;
  Event(StreamKind stream, uint64_t sequence, std::shared_ptr<void> native)
      : stream_(stream), sequence_(sequence), native_(std::move(native)), recorded_(true) {}

  bool recorded() const { return recorded_; }
  StreamKind stream() const { return stream_; }
  // 1, 2, ... per stream in record order (0 for a default Event).
  uint64_t sequence() const { return sequence_; }
  // The backend's own handle (a cudaEvent_t on CUDA); null where events need none.
  const std::shared_ptr<void>& native() const { return native_; }

 private:
  StreamKind stream_ = StreamKind::kCompute;
  uint64_t sequence_ = 0;
  std::shared_ptr<void> native_;
  bool recorded_ = false;
};

}  // namespace zero::backend
