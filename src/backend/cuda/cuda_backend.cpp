// CudaBackend: argument checks (ShapeErrors naming the op and the tensors, as the CPU backend
// gives), then one launcher of cuda_kernels.h or a cuBLASLt product on the current stream.
#include "backend/cuda/cuda_backend.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend {

using cuda_internal::Checks;
using cuda_internal::describe;
using cuda_internal::head_layout;
using cuda_internal::leading_rows;

namespace {

// f64 -> float toward zero, lowest bit set when anything was discarded (round to odd): one more
// rounding to 16 bits is then the correctly rounded result (the CPU backend's fill rule).
float narrow_to_odd(double value) {
  float f = static_cast<float>(value);
  if (static_cast<double>(f) == value || std::isnan(value)) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(value)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

template <typename T>
uint64_t integer_pattern(const Tensor& dst, double value) {
  constexpr int digits = std::numeric_limits<T>::digits;
  const double hi = std::ldexp(1.0, digits);
  const double lo = std::numeric_limits<T>::is_signed ? -hi : 0.0;
  if (!(std::trunc(value) == value && value >= lo && value < hi)) {
    throw ShapeError("fill: value " + std::to_string(value) + " is not representable in " +
                     dst.describe() + "; use an integer in range or a floating dtype");
  }
  const T v = static_cast<T>(value);
  uint64_t pattern = 0;
  std::memcpy(&pattern, &v, sizeof(T));
  return pattern;
}

// The state buffers optimizer_update takes for `kind` (backend.h lists them).
size_t optimizer_state_count(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kLamb:
    case OptimizerKind::kFrozenVarianceAdam: return 2;
    case OptimizerKind::kLion:
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kMomentum: return 1;
  }
  return 0;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    // "No device" is the ordinary answer on a machine without a GPU; anything else (a driver
    // older than the runtime, a broken install) would otherwise look the same: say it, once.
    // (Without any driver CUDA also says "insufficient driver": the driver version is 0 then.)
    static const bool reported = [status] {
      int driver = 0, runtime = 0;
      cudaDriverGetVersion(&driver);
      cudaRuntimeGetVersion(&runtime);
      if (status != cudaErrorNoDevice && driver > 0) {
        std::fprintf(stderr,
                     "zero: CUDA reports no usable device: %s (%s); driver supports CUDA %d.%d, "
                     "this build's runtime is %d.%d\n",
                     cudaGetErrorName(status), cudaGetErrorString(status), driver / 1000,
                     driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
      }
      return true;
    }();
    (void)reported;
    return 0;
  }
  return count;
}


uint64_t cuda_device_uuid_hash(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the 16 UUID bytes
  for (const char byte : prop.uuid.bytes) {
    hash = (hash ^ static_cast<unsigned char>(byte)) * 1099511628211ull;
  }
  return hash;
}

// ---- lifetime, memory, streams, events -------------------------------------------------------

namespace {

// The caching allocator's view of the backend's streams (CachingAllocator::Streams): the current
// StreamKind, and cudaEvent_t markers for blocks freed by a stream other than their home.
class CudaAllocatorStreams final : public CachingAllocator::Streams {
 public:
  explicit CudaAllocatorStreams(const CudaBackend& backend) : backend_(backend) {}

  int current_stream() const override { return static_cast<int>(backend_.current_stream()); }

  // Runs inside Tensor destructors: never throws. Without an event the host waits for the
  // freeing stream instead, which orders the block's next user just as well.
  std::shared_ptr<void> mark(int stream) override {
    const cudaStream_t s = backend_.stream(static_cast<StreamKind>(stream));
    cudaEvent_t event = nullptr;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess) {
      if (cudaEventRecord(event, s) == cudaSuccess) {
        return std::shared_ptr<void>(event, [](void* e) {
          cudaEventDestroy(static_cast<cudaEvent_t>(e));
        });
      }
      cudaEventDestroy(event);
    }
    cudaGetLastError();
    cudaStreamSynchronize(s);
    cudaGetLastError();  // a failure here resurfaces at the next checked call
    return nullptr;
  }

  void wait(int stream, const std::shared_ptr<void>& marker) override {
    if (marker == nullptr) return;
    ZERO_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(static_cast<StreamKind>(stream)),
                                        static_cast<cudaEvent_t>(marker.get()), 0));
  }

 private:
  const CudaBackend& backend_;
};

}  // namespace

CudaBackend::CudaBackend(int device_index) : index_(device_index), memory_(device_index) {
  const int count = cuda_device_count();
  if (device_index < 0 || device_index >= count) {
    throw Error("--device cuda:" + std::to_string(device_index) + ": " +
                (count == 0 ? std::string("no CUDA device is visible to this process (no GPU, no "
                                          "driver, or CUDA_VISIBLE_DEVICES hides it)")
                            : "only " + std::to_string(count) + " CUDA device(s) are visible") +
                "; train with --device cpu, or run on a machine with an NVIDIA GPU");
  }
  ZERO_CUDA_CHECK(cudaSetDevice(device_index));
  for (cudaStream_t& s : streams_)
    ZERO_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ZERO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&error_host_),
                                sizeof(cuda::KernelErrorSlot), cudaHostAllocDefault));
  std::memset(static_cast<void*>(error_host_), 0, sizeof(cuda::KernelErrorSlot));
  ZERO_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&error_device_), sizeof(cuda::KernelErrorSlot)));
  ZERO_CUDA_CHECK(cudaMemset(error_device_, 0, sizeof(cuda::KernelErrorSlot)));
  ZERO_CUDA_CHECK(cudaDeviceSynchronize());  // the memset ran on the legacy stream
  allocator_streams_ = std::make_unique<CudaAllocatorStreams>(*this);
  allocator_ = std::make_unique<CachingAllocator>(memory_);
  allocator_->set_streams(allocator_streams_.get());
  pinned_ = std::make_unique<cuda::CudaPinnedCache>(
      std::vector<cudaStream_t>(streams_.begin(), streams_.end()));
  matmul_ = std::make_unique<cuda::CublasLtMatmul>();
  gelu_epilogue_ = gelu_epilogue_from_environment();
}

// Waits for the device, then frees in reverse order of need: the workspace tensor and the cache
// (cudaFree) before the streams. Errors are ignored: destructors never throw.
CudaBackend::~CudaBackend() {
  cudaDeviceSynchronize();
  matmul_workspace_ = Tensor();
  matmul_.reset();
  allocator_.reset();
  allocator_streams_.reset();
  pinned_.reset();  // its events were recorded on the streams destroyed below
  if (error_host_ != nullptr) cudaFreeHost(error_host_);
  if (error_device_ != nullptr) cudaFree(error_device_);
  for (cudaStream_t s : streams_) {
    if (s != nullptr) cudaStreamDestroy(s);
  }
  cudaGetLastError();
}

std::optional<int64_t> CudaBackend::device_memory_capacity_bytes() const {
  // cudaMemGetInfo answers for the current device; the backend's host thread keeps it current.
  size_t free_bytes = 0, total_bytes = 0;
  ZERO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(total_bytes);
}

int64_t CudaBackend::preferred_row_elements(int64_t columns, DType dtype) const {
  const auto per_16_bytes = static_cast<int64_t>(16 / dtype_size(dtype));  // >= 1 (<= 8 bytes)
  return (columns + per_16_bytes - 1) / per_16_bytes * per_16_bytes;
}

int64_t CudaBackend::row_pitch(const Tensor& t, const char* op, const char* name) const {
  const Checks check(device(), op);
  check.here(t, name);
  if (t.is_contiguous()) return t.dim() == 0 ? 1 : t.size(-1);
  const auto reject = [&]() {
    check.fail(std::string(name) + " " + t.describe() +
               " must be contiguous or row-strided (a contiguous last dimension, rows one stride "
               "apart and no closer than a row's length); make a contiguous copy first");
  };
  const int64_t cols = t.dim() == 0 ? 1 : t.size(-1);
  if (t.dim() == 0 || (cols != 1 && t.stride(-1) != 1)) reject();
  // Walk the leading dimensions inward-out: the innermost one of size > 1 sets the row stride,
  // each outer one must continue it evenly (dimensions of size 1 have no stride that matters).
  int64_t pitch = -1, next = 0;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (pitch < 0) {
      pitch = t.stride(d);
    } else if (t.stride(d) != next) {
      reject();
    }
    next = t.stride(d) * t.size(d);
  }
  if (pitch < 0) return cols;  // a single row
  if (pitch < cols) reject();
  return pitch;
}

Tensor CudaBackend::scratch(size_t bytes) {
  return empty({static_cast<int64_t>(bytes == 0 ? 1 : bytes)}, DType::kU8,
               MemoryCategory::kWorkspace);
}

void CudaBackend::fetch_kernel_errors(cudaStream_t stream) {
  ZERO_CUDA_CHECK(cudaMemcpyAsync(error_host_, error_device_, sizeof(cuda::KernelErrorSlot),
                                  cudaMemcpyDeviceToHost, stream));
}

void CudaBackend::raise_kernel_errors() {
  const cuda::KernelErrorSlot slot = *error_host_;
  if (slot.code == cuda::kNoKernelError) return;
  const int code = slot.code;
  const int64_t value = slot.value, bound = slot.bound, position = slot.position;
  std::memset(static_cast<void*>(error_host_), 0, sizeof(cuda::KernelErrorSlot));
  // Clear the device slot so the next report is a new one (ordered after every stream's work:
  // the caller has just waited for it).
  ZERO_CUDA_CHECK(cudaMemset(error_device_, 0, sizeof(cuda::KernelErrorSlot)));
  ZERO_CUDA_CHECK(cudaDeviceSynchronize());
  if (code == cuda::kTargetOutOfRange) {
    throw Error("softmax_cross_entropy: target " + std::to_string(value) + " at row " +
                std::to_string(position) + " is outside the vocabulary [0, " +
                std::to_string(bound) +
                ") and is not ignore_index; check the labels and the model's vocab_size");
  }
  if (code == cuda::kMoeExpertOutOfRange) {
    throw Error("moe_dispatch: expert id " + std::to_string(value) + " at pair " +
                std::to_string(position) + " is outside [0, " + std::to_string(bound) +
                "); expert ids come from moe_route");
  }
  throw Error("token id " + std::to_string(value) + " at position " + std::to_string(position) +
              " is outside the vocabulary [0, " + std::to_string(bound) +
              "); check the tokenizer and the model's vocab_size");
}

Event CudaBackend::record_event(StreamKind stream) {
  cudaEvent_t event = nullptr;
  ZERO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  std::shared_ptr<void> owner(event,
                              [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  ZERO_CUDA_CHECK(cudaEventRecord(event, this->stream(stream)));
  return Event(stream, ++recorded_[static_cast<size_t>(stream)], std::move(owner));
}

void CudaBackend::wait_event(StreamKind waiter, const Event& event) {
  if (!event.recorded()) return;  // a default Event is complete
  ZERO_CHECK(event.native() != nullptr, "wait_event on an event of the "
                                            << stream_kind_name(event.stream())
                                            << " stream that this CUDA backend did not record");
  ZERO_CUDA_CHECK(
      cudaStreamWaitEvent(stream(waiter), static_cast<cudaEvent_t>(event.native().get()), 0));
}

void CudaBackend::synchronize_event(const Event& event) {
  if (!event.recorded()) return;
  ZERO_CHECK(event.native() != nullptr,
             "synchronize_event on an event that this CUDA backend did not record");
  host_waits_.wait_for_event(static_cast<cudaEvent_t>(event.native().get()));
}

Event CudaBackend::record_timing_event(StreamKind stream) {
  cudaEvent_t event = nullptr;
  ZERO_CUDA_CHECK(cudaEventCreate(&event));  // timing on: the profiler's events only
  std::shared_ptr<void> owner(event,
                              [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  ZERO_CUDA_CHECK(cudaEventRecord(event, this->stream(stream)));
  return Event(stream, 0, std::move(owner));
}

double CudaBackend::elapsed_seconds(const Event& start, const Event& end) {
  ZERO_CHECK(start.native() != nullptr && end.native() != nullptr,
             "elapsed_seconds of an event that record_timing_event did not make");
  const auto to = static_cast<cudaEvent_t>(end.native().get());
  host_waits_.wait_for_event(to);
  float ms = 0.0f;
  ZERO_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.native().get()), to));
  return static_cast<double>(ms) * 1e-3;
}

int CudaBackend::add_host_wait_check(std::function<void()> check) {
  return host_waits_.add(std::move(check));
}

void CudaBackend::remove_host_wait_check(int id) { host_waits_.remove(id); }

void CudaBackend::do_synchronize() {
  for (cudaStream_t s : streams_) host_waits_.wait_for_stream(s);
  ZERO_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy stream's work too (then at once)
  fetch_kernel_errors(current());
  host_waits_.wait_for_stream(current());
  raise_kernel_errors();
}

void CudaBackend::do_copy_from_host(Tensor& dst, const void* src) {
  Checks(device(), "copy_from_host").contiguous(dst, "dst");
  ZERO_CHECK(src != nullptr || dst.nbytes() == 0, "copy_from_host: null source");
  if (dst.nbytes() == 0) return;
  // The source may be pageable memory the caller reuses once we return: wait for the copy
  // (after the stream's earlier work, when host-wait checks are registered: as copy_to_host).
  if (!host_waits_.empty()) host_waits_.wait_for_stream(current());
  ZERO_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw_data(), src, dst.nbytes(), cudaMemcpyHostToDevice, current()));
  host_waits_.wait_for_stream(current());
}

void CudaBackend::do_copy_to_host(void* dst, const Tensor& src) {
  const int64_t pitch = row_pitch(src, "copy_to_host", "src");
  ZERO_CHECK(dst != nullptr || src.nbytes() == 0, "copy_to_host: null destination");
  // A copy into pageable memory blocks inside CUDA until the stream's earlier work is done, out
  // of reach of the host-wait checks: with checks registered, that work is waited for first.
  if (!host_waits_.empty()) host_waits_.wait_for_stream(current());
  if (src.nbytes() > 0 && src.is_contiguous()) {
    ZERO_CUDA_CHECK(
        cudaMemcpyAsync(dst, src.raw_data(), src.nbytes(), cudaMemcpyDeviceToHost, current()));
  } else if (src.nbytes() > 0) {
    // A row-strided view: its rows packed into dst, the gaps between them left behind.
    const size_t row_bytes = static_cast<size_t>(src.size(-1)) * src.element_size();
    ZERO_CUDA_CHECK(cudaMemcpy2DAsync(dst, row_bytes, src.raw_data(),
                                      static_cast<size_t>(pitch) * src.element_size(), row_bytes,
                                      static_cast<size_t>(leading_rows(src)),
                                      cudaMemcpyDeviceToHost, current()));
  }
  fetch_kernel_errors(current());  // rides along with the read: no extra wait
  host_waits_.wait_for_stream(current());
  raise_kernel_errors();
}

void CudaBackend::do_copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) {
  Checks(device(), "copy_to_pinned_async").contiguous(src, "src");
  if (src.nbytes() == 0) return;
  // Page-locked destination: a DMA the host does not wait for (backend.h's rules say when
  // the host may read it and when src may be freed).
  ZERO_CUDA_CHECK(cudaMemcpyAsync(pinned_dst.raw_data(), src.raw_data(), src.nbytes(),
                                  cudaMemcpyDeviceToHost, current()));
}

void CudaBackend::do_copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) {
  Checks(device(), "copy_from_pinned_async").contiguous(dst, "dst");
  if (dst.nbytes() == 0) return;
  // Page-locked source: a DMA the host does not wait for (backend.h: the host leaves pinned_src
  // alone until an event after it completed).
  ZERO_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), pinned_src.raw_data(), dst.nbytes(),
                                  cudaMemcpyHostToDevice, current()));
}

// ---- data movement ---------------------------------------------------------------------------

void CudaBackend::fill(Tensor& dst, double value) {
  Checks(device(), "fill").contiguous(dst, "dst");
  uint64_t pattern = 0;
  switch (dst.dtype()) {
    case DType::kF32:
      pattern = std::bit_cast<uint32_t>(static_cast<float>(value));
      break;
    case DType::kF64:
      pattern = std::bit_cast<uint64_t>(value);
      break;
    case DType::kBF16:
      pattern = float_to_bf16_bits(narrow_to_odd(value));
      break;
    case DType::kF16:
      pattern = float_to_f16_bits(narrow_to_odd(value));
      break;
    case DType::kI32:
      pattern = integer_pattern<int32_t>(dst, value);
      break;
    case DType::kI64:
      pattern = integer_pattern<int64_t>(dst, value);
      break;
    case DType::kU8:
      pattern = integer_pattern<uint8_t>(dst, value);
      break;
    case DType::kU16:
      pattern = integer_pattern<uint16_t>(dst, value);
      break;
    case DType::kU32:
      pattern = integer_pattern<uint32_t>(dst, value);
      break;
  }
  cuda::launch_fill_pattern(dst.raw_data(), dst.element_size(), pattern, dst.numel(), current());
}

void CudaBackend::copy(Tensor& dst, const Tensor& src) {
  const Checks check(device(), "copy");
  check.contiguous(dst, "dst").contiguous(src, "src");
  if (dst.numel() != src.numel()) {
    check.fail("dst " + dst.describe() + " and src " + src.describe() +
               " have different element counts");
  }
  if (dst.dtype() == src.dtype()) {
    if (dst.raw_data() != src.raw_data() && dst.nbytes() > 0) {
      ZERO_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(),
                                      cudaMemcpyDeviceToDevice, current()));
    }
    return;
  }
  if (!dtype_is_floating(dst.dtype()) || !dtype_is_floating(src.dtype())) {
    throw UnsupportedError("copy: converting " + src.describe() + " to " + dst.describe() +
                           " is not supported; integer tensors copy only to the same dtype");
  }
  cuda::launch_convert(dst.raw_data(), dst.dtype(), src.raw_data(), src.dtype(), dst.numel(),
                       current());
}

void CudaBackend::stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                           int64_t first_index) {
  const Checks check(device(), "stochastic_round_to_bf16");
  check.contiguous(dst, "dst")
      .contiguous(src, "src")
      .dtype(dst, DType::kBF16, "dst")
      .dtype(src, DType::kF32, "src");
  if (dst.numel() != src.numel())
    check.fail("dst " + dst.describe() + " and src " + src.describe() + " differ in size");
  if (first_index < 0) check.fail("negative first_index");
  cuda::launch_stochastic_round_to_bf16(dst.raw_data(), static_cast<const float*>(src.raw_data()),
                                        src.numel(), seed, first_index, current());
}

void CudaBackend::add(Tensor& y, const Tensor& x, double alpha) {
  const Checks check(device(), "add");
  check.contiguous(y, "y").contiguous(x, "x").same_shape(y, x, "y", "x");
  cuda::launch_add(y.raw_data(), y.dtype(), x.raw_data(), x.dtype(), y.numel(), alpha, current());
}

void CudaBackend::add_rounded(Tensor& acc, const Tensor& x, DType through) {
  const Checks check(device(), "add_rounded");
  check.contiguous(acc, "acc").contiguous(x, "x").dtype(acc, DType::kF32, "acc").dtype(x, DType::kF32, "x");
  if (acc.numel() != x.numel()) {
    check.fail("acc " + shape_to_string(acc.shape()) + " and x " + shape_to_string(x.shape()) +
               " differ in size");
  }
  cuda::launch_add_rounded(static_cast<float*>(acc.raw_data()), static_cast<const float*>(x.raw_data()),
                           through, acc.numel(), current());
}

void CudaBackend::round_in_place_sum_squares(Tensor& values, DType through,
                                             Tensor& squared_sum) {
  const Checks check(device(), "round_in_place_sum_squares");
  check.contiguous(values, "values").dtype(values, DType::kF32, "values");
  check.f64_scalar(squared_sum, "squared_sum");
  Tensor partials = scratch(cuda::reduction_scratch_bytes(values.numel()));
  cuda::launch_rounded_sum_squares(static_cast<double*>(squared_sum.raw_data()),
                                   static_cast<float*>(values.raw_data()), through,
                                   values.numel(), partials.raw_data(), current());
}

void CudaBackend::copy_sum_squares(Tensor& dst, const Tensor& src, Tensor& squared_sum) {
  const Checks check(device(), "copy_sum_squares");
  check.contiguous(dst, "dst").contiguous(src, "src").dtype(src, DType::kF32, "src");
  check.f64_scalar(squared_sum, "squared_sum");
  if (dst.numel() != src.numel()) {
    check.fail("dst " + dst.describe() + " and src " + src.describe() + " differ in size");
  }
  Tensor partials = scratch(cuda::reduction_scratch_bytes(src.numel()));
  cuda::launch_copy_sum_squares(static_cast<double*>(squared_sum.raw_data()), dst.raw_data(),
                                dst.dtype(), static_cast<const float*>(src.raw_data()), src.numel(),
                                partials.raw_data(), current());
}

void CudaBackend::round_in_place(Tensor& values, DType through) {
  const Checks check(device(), "round_in_place");
  check.contiguous(values, "values").dtype(values, DType::kF32, "values");
  if (through == DType::kF32) return;
  cuda::launch_round_in_place(static_cast<float*>(values.raw_data()), through, values.numel(),
                              current());
}

void CudaBackend::scale(Tensor& y, double alpha) {
  if (y.is_contiguous() || y.numel() == 0) {
    Checks(device(), "scale").here(y, "y");
    cuda::launch_scale(y.raw_data(), y.dtype(), y.numel(), alpha, current());
    return;
  }
  const int64_t pitch = row_pitch(y, "scale", "y");
  cuda::launch_scale_rows(y.raw_data(), y.dtype(), leading_rows(y), y.size(-1), pitch, alpha,
                          current());
}

void CudaBackend::scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) {
  const Checks check(device(), "scale_by_inverse_norm");
  check.contiguous(x, "x").dtype(x, DType::kF32, "x");
  check.contiguous(squared_norm, "squared_norm").dtype(squared_norm, DType::kF64, "squared_norm");
  if (squared_norm.numel() != 1 || !(eps > 0.0)) {
    throw ShapeError("scale_by_inverse_norm: squared_norm must hold one element and eps be > 0, "
                     "got " + squared_norm.describe() + " and eps " + std::to_string(eps));
  }
  cuda::launch_scale_by_inverse_norm(static_cast<float*>(x.raw_data()),
                                     static_cast<const double*>(squared_norm.raw_data()), eps,
                                     x.numel(), current());
}

// ---- embedding -------------------------------------------------------------------------------

namespace {

// `same_dtype` false: the caller checked the table's dtype against the rows' itself.
void check_embedding(const Checks& check, const Tensor& rows, const char* rows_name,
                     const Tensor& ids, const Tensor& table, const char* table_name,
                     bool same_dtype = true) {
  check.contiguous(rows, rows_name).ids(ids, "ids").contiguous(table, table_name);
  if (same_dtype) check.dtype(rows, table.dtype(), rows_name);
  const int64_t leading = leading_rows(rows);
  if (table.dim() != 2 || rows.dim() < 1 || rows.size(-1) != table.size(1) ||
      leading != ids.numel()) {
    check.fail(std::string(rows_name) + " " + shape_to_string(rows.shape()) + ", ids " +
               shape_to_string(ids.shape()) + " and " + table_name + " " +
               shape_to_string(table.shape()) + " do not fit; need " + table_name +
               " [V, C], one id per row and " + rows_name + " [..., C]");
  }
}

}  // namespace

void CudaBackend::embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                    bool accumulate) {
  check_embedding(Checks(device(), "embedding_forward"), out, "out", ids, table, "table");
  cuda::launch_embedding_forward(out.raw_data(), ids.raw_data(), ids.dtype() == DType::kI64,
                                 table.raw_data(), table.dtype(), ids.numel(), table.size(0),
                                 table.size(1), accumulate, error_device_, current());
}

void CudaBackend::embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  const Checks check(device(), "embedding_backward");
  check.grad_dtype(dtable, dout.dtype(), "dtable");
  check_embedding(check, dout, "dout", ids, dtable, "dtable", /*same_dtype=*/false);
  const int64_t n = ids.numel();
  if (n == 0 || dtable.size(1) == 0) return;
  const size_t bytes = cuda::embedding_backward_scratch_bytes(n);
  Tensor work = scratch(bytes);
  cuda::launch_embedding_backward(dtable.raw_data(), dtable.dtype(), dout.raw_data(), dout.dtype(),
                                  ids.raw_data(), ids.dtype() == DType::kI64, n, dtable.size(0),
                                  dtable.size(1), work.raw_data(), bytes, error_device_, current());
}

// ---- normalisation ---------------------------------------------------------------------------

namespace {

void check_norm(const Checks& check, const Tensor& x, const Tensor& weight, const Tensor* bias,
                std::initializer_list<const Tensor*> stats, int64_t* rows, int64_t* channels) {
  check.contiguous(x, "x").contiguous(weight, "weight");
  *channels = x.dim() == 0 ? 1 : x.size(-1);
  *rows = *channels == 0 ? 0 : x.numel() / *channels;
  if (weight.numel() != *channels || weight.dtype() != x.dtype()) {
    check.fail("weight " + weight.describe() + " does not match x " + x.describe());
  }
  if (bias != nullptr) {
    check.contiguous(*bias, "bias");
    if (bias->numel() != *channels || bias->dtype() != x.dtype()) {
      check.fail("bias " + bias->describe() + " does not match x " + x.describe());
    }
  }
  for (const Tensor* s : stats) {
    check.contiguous(*s, "statistics");
    if (s->numel() != *rows || s->dtype() != DType::kF32) {
      check.fail("statistics " + s->describe() + " must be f32[" + std::to_string(*rows) + "]");
    }
  }
}

void check_like_x(const Checks& check, const Tensor& t, const Tensor& x, const char* name) {
  check.contiguous(t, name).same_shape(t, x, name, "x").dtype(t, x.dtype(), name);
}

}  // namespace

void CudaBackend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                    const Tensor& weight, const Tensor* bias, double eps) {
  const Checks check(device(), "layernorm_forward");
  int64_t rows = 0, channels = 0;
  check_norm(check, x, weight, bias, {&mean, &rstd}, &rows, &channels);
  check_like_x(check, y, x, "y");
  cuda::launch_layernorm_forward(y.raw_data(), static_cast<float*>(mean.raw_data()),
                                 static_cast<float*>(rstd.raw_data()), x.raw_data(),
                                 weight.raw_data(), bias != nullptr ? bias->raw_data() : nullptr,
                                 x.dtype(), rows, channels, static_cast<float>(eps), current());
}

void CudaBackend::add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                                        const Tensor& a, const Tensor& b, const Tensor& weight,
                                        const Tensor* bias, double eps) {
  const Checks check(device(), "add_layernorm_forward");
  int64_t rows = 0, channels = 0;
  check_norm(check, a, weight, bias, {&mean, &rstd}, &rows, &channels);
  check_like_x(check, y, a, "y");
  check_like_x(check, sum, a, "sum");
  check_like_x(check, b, a, "b");
  cuda::launch_layernorm_forward(y.raw_data(), static_cast<float*>(mean.raw_data()),
                                 static_cast<float*>(rstd.raw_data()), a.raw_data(),
                                 weight.raw_data(), bias != nullptr ? bias->raw_data() : nullptr,
                                 a.dtype(), rows, channels, static_cast<float>(eps), current(),
                                 sum.raw_data(), b.raw_data());
}

void CudaBackend::layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                                     const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd) {
  layernorm_backward_with(dx, dweight, dbias, dy, x, weight, mean, rstd, nullptr);
}

void CudaBackend::layernorm_backward_add(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                         const Tensor& dy, const Tensor& x, const Tensor& weight,
                                         const Tensor& mean, const Tensor& rstd,
                                         const Tensor& residual) {
  check_norm_residual(dx, residual, "layernorm_backward_add");
  layernorm_backward_with(dx, dweight, dbias, dy, x, weight, mean, rstd, &residual);
}

void CudaBackend::layernorm_backward_with(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                          const Tensor& dy, const Tensor& x, const Tensor& weight,
                                          const Tensor& mean, const Tensor& rstd,
                                          const Tensor* residual) {
  const Checks check(device(),
                     residual != nullptr ? "layernorm_backward_add" : "layernorm_backward");
  int64_t rows = 0, channels = 0;
  check_norm(check, x, weight, nullptr, {&mean, &rstd}, &rows, &channels);
  check_like_x(check, dx, x, "dx");
  check_like_x(check, dy, x, "dy");
  if (residual != nullptr) check_like_x(check, *residual, x, "residual");
  check.contiguous(dweight, "dweight")
      .same_shape(dweight, weight, "dweight", "weight")
      .grad_dtype(dweight, x.dtype(), "dweight");
  if (dbias != nullptr) {
    check.contiguous(*dbias, "dbias")
        .same_shape(*dbias, weight, "dbias", "weight")
        .dtype(*dbias, dweight.dtype(), "dbias");
  }
  Tensor partials = scratch(cuda::norm_backward_scratch_bytes(rows, channels, dbias != nullptr));
  cuda::launch_layernorm_backward(
      dx.raw_data(), dweight.raw_data(), dbias != nullptr ? dbias->raw_data() : nullptr,
      dy.raw_data(), x.raw_data(), weight.raw_data(), static_cast<const float*>(mean.raw_data()),
      static_cast<const float*>(rstd.raw_data()), x.dtype(), dweight.dtype(), rows, channels,
      partials.raw_data(), current(), residual != nullptr ? residual->raw_data() : nullptr);
}

void CudaBackend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight,
                                  double eps) {
  const Checks check(device(), "rmsnorm_forward");
  int64_t rows = 0, channels = 0;
  check_norm(check, x, weight, nullptr, {&rstd}, &rows, &channels);
  check_like_x(check, y, x, "y");
  cuda::launch_rmsnorm_forward(y.raw_data(), static_cast<float*>(rstd.raw_data()), x.raw_data(),
                               weight.raw_data(), x.dtype(), rows, channels,
                               static_cast<float>(eps), current());
}

void CudaBackend::add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a,
                                      const Tensor& b, const Tensor& weight, double eps) {
  const Checks check(device(), "add_rmsnorm_forward");
  int64_t rows = 0, channels = 0;
  check_norm(check, a, weight, nullptr, {&rstd}, &rows, &channels);
  check_like_x(check, y, a, "y");
  check_like_x(check, sum, a, "sum");
  check_like_x(check, b, a, "b");
  cuda::launch_rmsnorm_forward(y.raw_data(), static_cast<float*>(rstd.raw_data()), a.raw_data(),
                               weight.raw_data(), a.dtype(), rows, channels,
                               static_cast<float>(eps), current(), sum.raw_data(), b.raw_data());
}

void CudaBackend::rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                                   const Tensor& weight, const Tensor& rstd) {
  rmsnorm_backward_with(dx, dweight, dy, x, weight, rstd, nullptr);
}

void CudaBackend::rmsnorm_backward_add(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                       const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                       const Tensor& residual) {
  check_norm_residual(dx, residual, "rmsnorm_backward_add");
  rmsnorm_backward_with(dx, dweight, dy, x, weight, rstd, &residual);
}

void CudaBackend::rmsnorm_backward_with(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                        const Tensor& x, const Tensor& weight,
                                        const Tensor& rstd, const Tensor* residual) {
  const Checks check(device(), residual != nullptr ? "rmsnorm_backward_add" : "rmsnorm_backward");
  int64_t rows = 0, channels = 0;
  check_norm(check, x, weight, nullptr, {&rstd}, &rows, &channels);
  check_like_x(check, dx, x, "dx");
  check_like_x(check, dy, x, "dy");
  if (residual != nullptr) check_like_x(check, *residual, x, "residual");
  check.contiguous(dweight, "dweight")
      .same_shape(dweight, weight, "dweight", "weight")
      .grad_dtype(dweight, x.dtype(), "dweight");
  Tensor partials = scratch(cuda::norm_backward_scratch_bytes(rows, channels, false));
  cuda::launch_rmsnorm_backward(dx.raw_data(), dweight.raw_data(), dy.raw_data(), x.raw_data(),
                                weight.raw_data(), static_cast<const float*>(rstd.raw_data()),
                                x.dtype(), dweight.dtype(), rows, channels, partials.raw_data(),
                                current(),
                                residual != nullptr ? residual->raw_data() : nullptr);
}

// ---- activations -----------------------------------------------------------------------------

void CudaBackend::gelu_forward(Tensor& y, const Tensor& x) {
  const Checks check(device(), "gelu_forward");
  check.contiguous(x, "x");
  check_like_x(check, y, x, "y");
  cuda::launch_gelu_forward(y.raw_data(), x.raw_data(), x.dtype(), x.numel(), current());
}

void CudaBackend::gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  const Checks check(device(), "gelu_backward");
  check.contiguous(x, "x");
  check_like_x(check, dx, x, "dx");
  check_like_x(check, dy, x, "dy");
  cuda::launch_gelu_backward(dx.raw_data(), dy.raw_data(), x.raw_data(), x.dtype(), x.numel(),
                             current());
}

namespace {

void check_swiglu(const Checks& check, const Tensor& y, const Tensor& gate_up, int64_t* rows,
                  int64_t* inner) {
  check.contiguous(y, "y").contiguous(gate_up, "gate_up").dtype(y, gate_up.dtype(), "y");
  const int64_t width = gate_up.dim() == 0 ? 1 : gate_up.size(-1);
  *rows = width == 0 ? 0 : gate_up.numel() / width;
  *inner = y.dim() == 0 ? 1 : y.size(-1);
  const int64_t y_rows = *inner == 0 ? 0 : y.numel() / *inner;
  if (y_rows != *rows || width != 2 * *inner) {
    check.fail("gate_up " + shape_to_string(gate_up.shape()) + " must be [N, 2I] for y " +
               shape_to_string(y.shape()) + " = [N, I]");
  }
}

}  // namespace

void CudaBackend::swiglu_forward(Tensor& y, const Tensor& gate_up) {
  int64_t rows = 0, inner = 0;
  check_swiglu(Checks(device(), "swiglu_forward"), y, gate_up, &rows, &inner);
  cuda::launch_swiglu_forward(y.raw_data(), gate_up.raw_data(), y.dtype(), rows, inner, current());
}

void CudaBackend::swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) {
  const Checks check(device(), "swiglu_backward");
  int64_t rows = 0, inner = 0;
  check_swiglu(check, dy, gate_up, &rows, &inner);
  check.contiguous(dgate_up, "dgate_up")
      .same_shape(dgate_up, gate_up, "dgate_up", "gate_up")
      .dtype(dgate_up, gate_up.dtype(), "dgate_up");
  cuda::launch_swiglu_backward(dgate_up.raw_data(), dy.raw_data(), gate_up.raw_data(), dy.dtype(),
                               rows, inner, current());
}

// ---- rotary embedding ------------------------------------------------------------------------

void CudaBackend::rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const Checks check(device(), "rope_apply");
  check.here(x, "x");
  if (x.dim() != 4 || x.stride(3) != 1) {
    check.fail("x must be a [B, T, H, D] view with contiguous D, got " + x.describe());
  }
  const int64_t seq = x.size(1), d = x.size(3), half = d / 2;
  check.contiguous(cos, "cos").contiguous(sin, "sin");
  // The tables are x's dtype, or f32 for 16-bit x (the model keeps its rotary tables in f32).
  const bool table_dtype_ok =
      cos.dtype() == x.dtype() || (cos.dtype() == DType::kF32 && dtype_size(x.dtype()) == 2);
  if (d % 2 != 0 || cos.shape() != Shape{seq, half} || sin.shape() != Shape{seq, half} ||
      !table_dtype_ok || sin.dtype() != cos.dtype()) {
    check.fail("cos/sin must be " + std::string(dtype_name(x.dtype())) + " (or f32) [" + std::to_string(seq) +
               ", " + std::to_string(half) + "] for x " + x.describe() + ", got " + cos.describe() +
               " and " + sin.describe());
  }
  cuda::launch_rope(x.raw_data(), head_layout(x), cos.raw_data(), sin.raw_data(), x.dtype(),
                    cos.dtype(), inverse, current());
}

// ---- attention -------------------------------------------------------------------------------

namespace {

void check_head_view(const Checks& check, const Tensor& t, const char* name) {
  check.here(t, name);
  if (t.dim() != 4 || (t.stride(3) != 1 && t.size(3) > 1)) {
    check.fail(std::string(name) +
               " must be a [B, T, heads, D] tensor or view with contiguous D, got " + t.describe());
  }
}

cuda::AttentionArgs attention_args(const Checks& check, const Tensor& out, const Tensor& lse,
                                   const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                   int64_t window) {
  check_head_view(check, q, "q");
  check_head_view(check, k, "k");
  check_head_view(check, v, "v");
  check_head_view(check, out, "out");
  cuda::AttentionArgs a;
  a.dtype = q.dtype();
  a.batch = q.size(0);
  a.seq = q.size(1);
  a.heads = q.size(2);
  a.kv_heads = k.size(2);
  a.head_dim = q.size(3);
  if (k.size(0) != a.batch || k.size(1) != a.seq || k.size(3) != a.head_dim) {
    check.fail("k " + shape_to_string(k.shape()) + " does not fit q " + shape_to_string(q.shape()) +
               "; k must be [B, T, KVH, D] with q's B, T, D");
  }
  check.same_shape(v, k, "v", "k").same_shape(out, q, "out", "q");
  if (a.kv_heads <= 0 || a.heads <= 0 || a.heads % a.kv_heads != 0) {
    check.fail("q has " + std::to_string(a.heads) + " heads, which is not a multiple of k/v's " +
               std::to_string(a.kv_heads) + " kv heads");
  }
  if (a.head_dim <= 0 || a.head_dim > cuda::kMaxAttentionHeadDim) {
    throw UnsupportedError("attention on the CUDA backend supports head dimensions 1.." +
                           std::to_string(cuda::kMaxAttentionHeadDim) + ", not " +
                           std::to_string(a.head_dim));
  }
  check.dtype(k, a.dtype, "k").dtype(v, a.dtype, "v").dtype(out, a.dtype, "out");
  check.contiguous(lse, "lse").dtype(lse, DType::kF32, "lse");
  if (lse.shape() != Shape{a.batch, a.heads, a.seq}) {
    check.fail("lse " + shape_to_string(lse.shape()) +
               " must be [B, H, T] = " + shape_to_string({a.batch, a.heads, a.seq}));
  }
  if (window < 0) {
    check.fail("window " + std::to_string(window) +
               " is negative; use 0 for full causal attention or w > 0 for a sliding window");
  }
  a.scale = static_cast<float>(scale);
  a.window = window;
  a.q = q.raw_data();
  a.k = k.raw_data();
  a.v = v.raw_data();
  a.out = out.raw_data();
  a.q_layout = head_layout(q);
  a.k_layout = head_layout(k);
  a.v_layout = head_layout(v);
  a.out_layout = head_layout(out);
  a.lse = static_cast<float*>(lse.raw_data());
  return a;
}

}  // namespace

void CudaBackend::attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                                    const Tensor& v, double scale, int64_t window) {
  const cuda::AttentionArgs a =
      attention_args(Checks(device(), "attention_forward"), out, lse, q, k, v, scale, window);
  cuda::launch_attention_forward(a, current());
}

void CudaBackend::attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                                     const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& out, const Tensor& lse, double scale,
                                     int64_t window) {
  const Checks check(device(), "attention_backward");
  cuda::AttentionArgs a = attention_args(check, out, lse, q, k, v, scale, window);
  const std::pair<const Tensor*, const char*> grads[] = {
      {&dout, "dout"}, {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  for (const auto& [t, name] : grads) {
    check_head_view(check, *t, name);
    check.dtype(*t, a.dtype, name);
  }
  check.same_shape(dout, q, "dout", "q").same_shape(dq, q, "dq", "q");
  check.same_shape(dk, k, "dk", "k").same_shape(dv, v, "dv", "v");
  a.dout = dout.raw_data();
  a.dout_layout = head_layout(dout);
  a.dq = dq.raw_data();
  a.dq_layout = head_layout(dq);
  a.dk = dk.raw_data();
  a.dk_layout = head_layout(dk);
  a.dv = dv.raw_data();
  a.dv_layout = head_layout(dv);
  Tensor delta = scratch(sizeof(float) * static_cast<size_t>(a.batch * a.heads * a.seq));
  a.delta = static_cast<float*>(delta.raw_data());
  Tensor ds;
  if (const size_t bytes = cuda::attention_backward_ds_bytes(a); bytes > 0) {
    ds = scratch(bytes);
    a.ds = ds.raw_data();
  }
  cuda::launch_attention_backward(a, current());
}

// ---- loss ------------------------------------------------------------------------------------

void CudaBackend::softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                        const Tensor& targets, int64_t ignore_index,
                                        double grad_scale) {
  const Checks check(device(), "softmax_cross_entropy");
  check.contiguous(losses, "losses").ids(targets, "targets");
  const int64_t logits_pitch = row_pitch(logits, "softmax_cross_entropy", "logits");
  if (losses.dtype() != logits.dtype() && losses.dtype() != DType::kF32) {
    check.fail("losses " + losses.describe() + " must be f32 or the dtype of logits " +
               logits.describe());
  }
  if (logits.dim() < 1) check.fail("logits " + logits.describe() + " must be [..., V]");
  const int64_t vocab = logits.size(-1), rows = leading_rows(logits);
  if (targets.numel() != rows || losses.numel() != rows) {
    check.fail("logits " + shape_to_string(logits.shape()) + " has " + std::to_string(rows) +
               " rows but targets are " + shape_to_string(targets.shape()) + " and losses " +
               shape_to_string(losses.shape()) + "; need one target and one loss per row");
  }
  int64_t dlogits_pitch = logits_pitch;
  if (dlogits != nullptr) {
    dlogits_pitch = row_pitch(*dlogits, "softmax_cross_entropy", "dlogits");
    check.same_shape(*dlogits, logits, "dlogits", "logits")
        .dtype(*dlogits, logits.dtype(), "dlogits");
    // Written in place, each element is read just before it is overwritten: only the very same
    // view may alias.
    if (dlogits->raw_data() == logits.raw_data() && dlogits_pitch != logits_pitch) {
      check.fail("dlogits " + dlogits->describe() + " starts at the logits " + logits.describe() +
                 " with another row stride; pass the logits view itself to write over them");
    }
  }
  cuda::launch_softmax_cross_entropy(losses.raw_data(), losses.dtype() == DType::kF32,
                                     dlogits != nullptr ? dlogits->raw_data() : nullptr,
                                     dlogits_pitch, logits.raw_data(), logits_pitch,
                                     logits.dtype(), targets.raw_data(),
                                     targets.dtype() == DType::kI64, rows, vocab, ignore_index,
                                     grad_scale, error_device_, current());
}

// ---- vocabulary slices -----------------------------------------------------------------------

void CudaBackend::embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                                          int64_t first_id, bool accumulate) {
  check_embedding(Checks(device(), "embedding_forward_slice"), out, "out", ids, table, "table");
  cuda::launch_embedding_forward_slice(out.raw_data(), ids.raw_data(), ids.dtype() == DType::kI64,
                                       table.raw_data(), table.dtype(), ids.numel(),
                                       table.size(0), table.size(1), first_id, accumulate,
                                       current());
}

void CudaBackend::embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                           int64_t first_id) {
  check_embedding(Checks(device(), "embedding_backward_slice"), dout, "dout", ids, dtable,
                  "dtable");
  cuda::launch_embedding_backward_slice(dtable.raw_data(), dout.raw_data(), dtable.dtype(),
                                        ids.raw_data(), ids.dtype() == DType::kI64, ids.numel(),
                                        dtable.size(0), dtable.size(1), first_id, current());
}

namespace {
// The f64 [rows] statistics of the sliced cross-entropy.
void check_slice_stats(const Checks& check, const Tensor& logits,
                       std::initializer_list<std::pair<const Tensor*, const char*>> stats) {
  check.contiguous(logits, "logits");
  if (logits.dim() < 1) check.fail("logits " + logits.describe() + " must be [..., V]");
  const int64_t rows = leading_rows(logits);
  for (const auto& [t, name] : stats) {
    check.contiguous(*t, name).dtype(*t, DType::kF64, name);
    if (t->numel() != rows) {
      check.fail(std::string(name) + " " + t->describe() + " needs one value per row of logits " +
                 logits.describe());
    }
  }
}
}  // namespace

void CudaBackend::cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) {
  const Checks check(device(), "cross_entropy_slice_max");
  check_slice_stats(check, logits, {{&row_max, "row_max"}});
  cuda::launch_cross_entropy_slice_max(static_cast<double*>(row_max.raw_data()), logits.raw_data(),
                                       logits.dtype(), leading_rows(logits), logits.size(-1),
                                       current());
}

void CudaBackend::cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit,
                                           const Tensor& logits, const Tensor& row_max,
                                           const Tensor& targets, int64_t first_column) {
  const Checks check(device(), "cross_entropy_slice_sums");
  check_slice_stats(check, logits,
                    {{&sum_exp, "sum_exp"}, {&target_logit, "target_logit"}, {&row_max, "row_max"}});
  check.ids(targets, "targets");
  if (targets.numel() != leading_rows(logits)) {
    check.fail("targets " + targets.describe() + " need one id per row of logits " +
               logits.describe());
  }
  cuda::launch_cross_entropy_slice_sums(
      static_cast<double*>(sum_exp.raw_data()), static_cast<double*>(target_logit.raw_data()),
      logits.raw_data(), logits.dtype(), static_cast<const double*>(row_max.raw_data()),
      targets.raw_data(), targets.dtype() == DType::kI64, leading_rows(logits), logits.size(-1),
      first_column, current());
}

void CudaBackend::cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                             const Tensor& row_max, const Tensor& sum_exp,
                                             const Tensor& target_logit, const Tensor& targets,
                                             int64_t first_column, int64_t ignore_index,
                                             double grad_scale) {
  const Checks check(device(), "cross_entropy_slice_finish");
  check_slice_stats(check, logits,
                    {{&row_max, "row_max"}, {&sum_exp, "sum_exp"}, {&target_logit, "target_logit"}});
  check.contiguous(losses, "losses").ids(targets, "targets");
  const int64_t rows = leading_rows(logits);
  if (losses.dtype() != logits.dtype() && losses.dtype() != DType::kF32) {
    check.fail("losses " + losses.describe() + " must be f32 or the dtype of logits " +
               logits.describe());
  }
  if (targets.numel() != rows || losses.numel() != rows) {
    check.fail("targets " + targets.describe() + " and losses " + losses.describe() +
               " need one value per row of logits " + logits.describe());
  }
  if (dlogits != nullptr) {
    check.contiguous(*dlogits, "dlogits")
        .same_shape(*dlogits, logits, "dlogits", "logits")
        .dtype(*dlogits, logits.dtype(), "dlogits");
  }
  cuda::launch_cross_entropy_slice_finish(
      losses.raw_data(), losses.dtype() == DType::kF32,
      dlogits != nullptr ? dlogits->raw_data() : nullptr, logits.raw_data(), logits.dtype(),
      static_cast<const double*>(row_max.raw_data()), static_cast<const double*>(sum_exp.raw_data()),
      static_cast<const double*>(target_logit.raw_data()), targets.raw_data(),
      targets.dtype() == DType::kI64, rows, logits.size(-1), first_column, ignore_index,
      grad_scale, current());
}

// ---- reductions ------------------------------------------------------------------------------

void CudaBackend::sum_squares(Tensor& out, const Tensor& x, bool accumulate) {
  const Checks check(device(), "sum_squares");
  check.f64_scalar(out, "out").contiguous(x, "x");
  Tensor partials = scratch(cuda::reduction_scratch_bytes(x.numel()));
  cuda::launch_sum_into(static_cast<double*>(out.raw_data()), x.raw_data(), x.dtype(), x.numel(),
                        true, 1.0, accumulate, partials.raw_data(), current());
}

void CudaBackend::sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) {
  const Checks check(device(), "sum");
  check.f64_scalar(out, "out").contiguous(x, "x");
  Tensor partials = scratch(cuda::reduction_scratch_bytes(x.numel()));
  cuda::launch_sum_into(static_cast<double*>(out.raw_data()), x.raw_data(), x.dtype(), x.numel(),
                        false, alpha, accumulate, partials.raw_data(), current());
}

// ---- optimizer updates -----------------------------------------------------------------------

void CudaBackend::optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                   std::span<Tensor> state, std::span<const ParamSegment> segments,
                                   const OptimizerHyper& hyper) {
  update_optimizer(kind, params, grads, state, segments, hyper, nullptr);
}

void CudaBackend::optimizer_update_with_copy(OptimizerKind kind, Tensor& params,
                                             const Tensor& grads, std::span<Tensor> state,
                                             std::span<const ParamSegment> segments,
                                             const OptimizerHyper& hyper, Tensor& param_copy) {
  update_optimizer(kind, params, grads, state, segments, hyper, &param_copy);
}

void CudaBackend::update_optimizer(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                   std::span<Tensor> state, std::span<const ParamSegment> segments,
                                   const OptimizerHyper& hyper, Tensor* param_copy) {
  const Checks check(device(), "optimizer_update");
  check.contiguous(params, "params").contiguous(grads, "grads");
  check.dtype(params, DType::kF32, "params").same_shape(params, grads, "params", "grads");
  const bool wide_grads = grads.dtype() == DType::kF32;
  if (!wide_grads && grads.dtype() != DType::kBF16 && grads.dtype() != DType::kF16) {
    check.fail("grads must be f32, bf16 or f16, got " + grads.describe());
  }
  if (!wide_grads && param_copy != nullptr && param_copy->dtype() != grads.dtype()) {
    check.fail(std::string(dtype_name(grads.dtype())) +
               " grads need a parameter copy of their dtype, got " + param_copy->describe());
  }
  if (param_copy != nullptr) {
    check.contiguous(*param_copy, "param_copy");
    if (param_copy->numel() != params.numel() || !dtype_is_floating(param_copy->dtype()) ||
        param_copy->dtype() == DType::kF64) {
      check.fail("param_copy " + param_copy->describe() + " must hold params' " +
                 std::to_string(params.numel()) + " elements in f32, bf16 or f16");
    }
  }
  const size_t wanted = optimizer_state_count(kind);
  if (state.size() != wanted) {
    check.fail("expected " + std::to_string(wanted) + " state buffers, got " +
               std::to_string(state.size()));
  }
  for (Tensor& s : state) {
    check.contiguous(s, "state")
        .dtype(s, DType::kF32, "state")
        .same_shape(s, params, "state", "params");
  }
  const int64_t n = params.numel();
  for (const ParamSegment& seg : segments) {
    if (seg.offset < 0 || seg.length < 0 || seg.offset + seg.length > n) {
      check.fail("segment [" + std::to_string(seg.offset) + ", +" + std::to_string(seg.length) +
                 ") is outside the " + std::to_string(n) + "-element buffer");
    }
  }
  cuda::launch_optimizer_update(kind, static_cast<float*>(params.raw_data()), grads.raw_data(),
                                grads.dtype(),
                                static_cast<float*>(state[0].raw_data()),
                                wanted == 2 ? static_cast<float*>(state[1].raw_data()) : nullptr,
                                segments.data(), segments.size(), hyper,
                                param_copy != nullptr ? param_copy->raw_data() : nullptr,
                                param_copy != nullptr ? param_copy->dtype() : DType::kF32,
                                current());
}

// ---- 1-bit compression -----------------------------------------------------------------------

void CudaBackend::onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                                         const Tensor& values, const OneBitLayout& layout) {
  const char* op = "onebit_worker_compress";
  check_onebit_worker_args(op, bits, scales, worker_error, values, layout);
  const Checks check(device(), op);
  check.contiguous(bits, "bits")
      .contiguous(scales, "scales")
      .contiguous(worker_error, "worker_error")
      .contiguous(values, "values");
  Tensor partials = scratch(cuda::onebit_worker_scratch_bytes(layout));
  cuda::launch_onebit_worker_compress(
      static_cast<uint8_t*>(bits.raw_data()), static_cast<float*>(scales.raw_data()),
      static_cast<float*>(worker_error.raw_data()), static_cast<const float*>(values.raw_data()),
      layout, partials.raw_data(), current());
}

void CudaBackend::onebit_server_compress(Tensor& bits_out, Tensor& scales_out,
                                         Tensor& server_error, const Tensor& bits_in,
                                         const Tensor& scales_in, const OneBitLayout& layout) {
  const char* op = "onebit_server_compress";
  check_onebit_server_args(op, bits_out, scales_out, server_error, bits_in, scales_in, layout);
  const Checks check(device(), op);
  check.contiguous(bits_out, "bits_out")
      .contiguous(scales_out, "scales_out")
      .contiguous(server_error, "server_error")
      .contiguous(bits_in, "bits_in")
      .contiguous(scales_in, "scales_in");
  Tensor partials = scratch(cuda::onebit_server_scratch_bytes(layout));
  cuda::launch_onebit_server_compress(
      static_cast<uint8_t*>(bits_out.raw_data()), static_cast<float*>(scales_out.raw_data()),
      static_cast<float*>(server_error.raw_data()),
      static_cast<const uint8_t*>(bits_in.raw_data()),
      static_cast<const float*>(scales_in.raw_data()), layout, partials.raw_data(), current());
}

void CudaBackend::onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                                    const OneBitLayout& layout) {
  const char* op = "onebit_decompress";
  check_onebit_decompress_args(op, values, bits, scales, layout);
  const Checks check(device(), op);
  check.contiguous(values, "values").contiguous(bits, "bits").contiguous(scales, "scales");
  cuda::launch_onebit_decompress(static_cast<float*>(values.raw_data()),
                                 static_cast<const uint8_t*>(bits.raw_data()),
                                 static_cast<const float*>(scales.raw_data()), layout,
                                 current());
}

}  // namespace zero::backend
