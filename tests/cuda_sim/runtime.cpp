// The CUDA runtime API functions the backend calls, for a simulated device 0 (H100-like numbers;
// its name says it is the simulator). Asynchronous calls are enqueued on their stream's queue
// (streams.h) and run when the host forces them, in the order CUDA_SIM_STREAMS picks; blocking
// calls force what they wait for. Copies are checked against the allocation registry when they
// are enqueued, as CUDA checks its arguments at the call.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "device_memory.h"
#include "runtime_state.h"

// The runtime's event handle: the point of its latest record, and the time that record ran.
struct CUevent_st {
  unsigned flags = 0;
  bool recorded = false;
  cuda_sim::StreamPoint point;
  std::shared_ptr<std::chrono::steady_clock::time_point> when =
      std::make_shared<std::chrono::steady_clock::time_point>();
};

namespace cuda_sim {
namespace {

thread_local cudaError_t g_last_error = cudaSuccess;

std::mutex& handles_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<const void*>& live_streams() {
  static auto* streams = new std::set<const void*>;
  return *streams;
}
std::set<const void*>& live_events() {
  static auto* events = new std::set<const void*>;
  return *events;
}

cudaError_t fail(cudaError_t error) {
  g_last_error = error;
  return error;
}

bool is_live_event(cudaEvent_t event) {
  std::lock_guard lock(handles_mutex());
  return live_events().count(event) != 0;
}

// [pointer, pointer + bytes) inside one live allocation (device or pinned when `device_side`).
bool inside_allocation(const void* pointer, size_t bytes) {
  const auto allocation = find_allocation(pointer);
  if (!allocation) return false;
  return reinterpret_cast<uintptr_t>(pointer) + bytes <= allocation->begin + allocation->bytes;
}

// The checks of one side of a copy: device sides must lie inside an allocation. Host sides are
// not checked (pageable memory is anywhere).
bool copy_sides_valid(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return true;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_device && !inside_allocation(dst, bytes)) return false;
  if (src_device && !inside_allocation(src, bytes)) return false;
  return true;
}

bool is_pinned(const void* pointer) {
  const auto allocation = find_allocation(pointer);
  return allocation && allocation->kind == MemoryKind::kPinnedHost;
}

// One copy on `stream`, as CUDA orders it: pageable host sources are read at the call (CUDA
// stages them before returning); copies into pageable host memory return once done (the host
// blocks on the stream); everything else runs when the stream gets there.
cudaError_t copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t stream, const char* call) {
  if (!copy_sides_valid(dst, src, bytes, kind)) {
    std::fprintf(stderr,
                 "cuda_sim: %s of %zu bytes (kind %d) reaches outside a device allocation\n",
                 call, bytes, static_cast<int>(kind));
    return fail(cudaErrorInvalidValue);
  }
  if (bytes == 0) return cudaSuccess;
  const bool host_source = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
  const bool host_destination = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
  if (host_source && !is_pinned(src)) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  if (host_destination && !is_pinned(dst)) run_until(end_of(stream));
  return cudaSuccess;
}

}  // namespace

void set_last_error(cudaError_t error) { g_last_error = error; }

bool is_known_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return true;
  std::lock_guard lock(handles_mutex());
  return live_streams().count(stream) != 0;
}

}  // namespace cuda_sim

using namespace cuda_sim;

// Errors ----------------------------------------------------------------------------------------
cudaError_t cudaGetLastError() {
  const cudaError_t error = g_last_error;
  g_last_error = cudaSuccess;
  return error;
}
cudaError_t cudaPeekAtLastError() { return g_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    default: return "cudaError (unnamed in cuda_sim)";
  }
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    default: return "unknown error (cuda_sim)";
  }
}

// Device --------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  run_all();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "zero.cpp CUDA simulator (CPU, H100-like limits)");
  prop->totalGlobalMem = kDeviceMemoryBytes;
  prop->sharedMemPerBlock = kDefaultDynamicShared;
  prop->sharedMemPerBlockOptin = kMaxDynamicSharedOptIn;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = kDeviceMemoryBytes;
  *free_bytes = kDeviceMemoryBytes - device_bytes_in_use();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    std::fprintf(stderr, "cuda_sim: cudaFuncSetAttribute attribute %d is not simulated\n",
                 static_cast<int>(attribute));
    return fail(cudaErrorInvalidValue);
  }
  if (value < 0 || value > kMaxDynamicSharedOptIn) return fail(cudaErrorInvalidValue);
  set_max_dynamic_shared(func, value);
  return cudaSuccess;
}

// Memory --------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = allocate(bytes, MemoryKind::kDevice);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* pointer) {
  run_all();  // cudaFree synchronises the device: no queued work still uses the memory
  if (pointer == nullptr || release(pointer, MemoryKind::kDevice)) return cudaSuccess;
  std::fprintf(stderr, "cuda_sim: cudaFree of %p, which cudaMalloc did not return\n", pointer);
  return fail(cudaErrorInvalidDevicePointer);
}
cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int /*flags*/) {
  *pointer = allocate(bytes, MemoryKind::kPinnedHost);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  return cudaHostAlloc(pointer, bytes, cudaHostAllocDefault);
}
cudaError_t cudaFreeHost(void* pointer) {
  run_all();
  if (pointer == nullptr || release(pointer, MemoryKind::kPinnedHost)) return cudaSuccess;
  std::fprintf(stderr, "cuda_sim: cudaFreeHost of %p, which cudaHostAlloc did not return\n",
               pointer);
  return fail(cudaErrorInvalidValue);
}

// On the legacy stream, and the host waits for it (the legacy stream does not wait for the
// backend's non-blocking streams: the caller orders those itself).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t status = copy_async(dst, src, bytes, kind, nullptr, "cudaMemcpy");
  if (status == cudaSuccess) run_until(end_of(nullptr));
  return status;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return copy_async(dst, src, bytes, kind, stream, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (width > dst_pitch || width > src_pitch) return fail(cudaErrorInvalidPitchValue);
  for (size_t row = 0; row < height; ++row) {
    const cudaError_t status =
        copy_async(static_cast<char*>(dst) + row * dst_pitch,
                   static_cast<const char*>(src) + row * src_pitch, width, kind, stream,
                   "cudaMemcpy2DAsync");
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                         size_t width, size_t height, cudaMemcpyKind kind) {
  const cudaError_t status =
      cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, kind, nullptr);
  if (status == cudaSuccess) run_until(end_of(nullptr));
  return status;
}
cudaError_t cudaMemset2DAsync(void* pointer, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (width > pitch) return fail(cudaErrorInvalidPitchValue);
  for (size_t row = 0; row < height; ++row) {
    const cudaError_t status =
        cudaMemsetAsync(static_cast<char*>(pointer) + row * pitch, value, width, stream);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}
cudaError_t cudaMemset2D(void* pointer, size_t pitch, int value, size_t width, size_t height) {
  return cudaMemset2DAsync(pointer, pitch, value, width, height, nullptr);
}
// On the legacy stream; like CUDA's, it may return before the memory is set.
cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  return cudaMemsetAsync(pointer, value, bytes, nullptr);
}
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes != 0 && !inside_allocation(pointer, bytes)) {
    std::fprintf(stderr, "cuda_sim: cudaMemset of %zu bytes reaches outside an allocation\n",
                 bytes);
    return fail(cudaErrorInvalidValue);
  }
  if (bytes != 0) enqueue(stream, [pointer, value, bytes] { std::memset(pointer, value, bytes); });
  return cudaSuccess;
}

// Streams and events ----------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{flags, new_stream_queue((flags & cudaStreamNonBlocking) == 0)};
  std::lock_guard lock(handles_mutex());
  live_streams().insert(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
// CUDA lets the stream's pending work finish after this returns; here it runs now.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  run_until(end_of(stream));
  {
    std::lock_guard lock(handles_mutex());
    if (live_streams().erase(stream) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  run_until(end_of(stream));
  return cudaSuccess;
}
// cudaErrorNotReady (not an error) while the stream has pending work; each such query lets the
// device make progress, as cudaEventQuery does.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!is_known_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  const StreamPoint end = end_of(stream);
  if (reached(end)) return cudaSuccess;
  run_one(end);
  return reached(end) ? cudaSuccess : cudaErrorNotReady;
}
// Waits for the event's latest record at the time of this call (a never recorded event: none).
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  if (!is_known_stream(stream) || !is_live_event(event)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (event->recorded) enqueue_wait(stream, event->point);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st;
  (*event)->flags = flags;
  std::lock_guard lock(handles_mutex());
  live_events().insert(*event);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  {
    std::lock_guard lock(handles_mutex());
    if (live_events().erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!is_live_event(event) || !is_known_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  // A record is an operation of its own, so the time is taken when the stream reaches it; the
  // clock is shared with the operation, which may run after the event was destroyed.
  event->when = std::make_shared<std::chrono::steady_clock::time_point>();
  enqueue(stream, [when = event->when] { *when = std::chrono::steady_clock::now(); });
  event->point = end_of(stream);
  event->recorded = true;
  return cudaSuccess;
}
// cudaErrorNotReady (not an error: the last error is left alone) while the work before the
// record is pending; each such query lets the device make progress, so a polling loop ends.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!is_live_event(event)) return fail(cudaErrorInvalidResourceHandle);
  if (!event->recorded || reached(event->point)) return cudaSuccess;
  run_one(event->point);
  return cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!is_live_event(event)) return fail(cudaErrorInvalidResourceHandle);
  if (event->recorded) run_until(event->point);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!is_live_event(start) || !is_live_event(end)) return fail(cudaErrorInvalidResourceHandle);
  if ((start->flags | end->flags) & cudaEventDisableTiming) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  if (!reached(start->point) || !reached(end->point)) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*end->when - *start->when).count();
  return cudaSuccess;
}
