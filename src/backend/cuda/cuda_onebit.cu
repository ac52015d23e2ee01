// 1-bit compression with error feedback on the device: Backend::onebit_worker_compress,
// onebit_server_compress and onebit_decompress (semantics in backend.h, the layout in
// backend/onebit_layout.h, the oracle backend/cpu/cpu_onebit.cpp, whose f32 operations and order
// per element these kernels repeat; compiled without fused multiply-add like the CPU's loops).
//
// Every kernel works in sign bytes: a thread takes a byte's 8 elements at a time, so it builds
// the byte in a register and no two threads share one (no atomics, no shuffles). Segments are cut
// into blocks of kBytesPerBlock bytes, one CUDA block each over the segments of a launch (a
// block finds its segment by binary search over the batch's block prefix, as cuda_optimizers.cu
// does): an 8-element LayerNorm bias and a 40 M-element embedding side by side keep every block
// busy. Segments travel as kernel parameters, kSegmentsPerLaunch per launch: no host-to-device
// copy and no host wait.
//
// A compression is three launches per batch of segments:
//   1. sums:   each block writes the f64 sum of squares of its elements to its own slot of a
//              scratch array (thread-strided bytes, then block_sum's fixed tree);
//   2. scales: one block per segment adds the segment's slots (thread-strided, then the fixed
//              tree) and stores the f32 scale;
//   3. signs:  the blocks of 1 recompute the same values, write the errors and the sign bytes.
// The order of every sum depends on the layout alone, so the results are deterministic. It is not
// the CPU's order (8192-element blocks summed one after another), so a scale may differ from the
// CPU's in its last f32 bit where the two f64 sums round to either side of an f32 rounding point;
// the signs do not depend on the scale.
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/onebit_layout.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScaleThreads = 256;
constexpr int64_t kBytesPerBlock = 4 * kThreads;  // 4 bytes (32 elements) a thread
constexpr int kSegmentsPerLaunch = 64;

// One segment as the kernels see it (OneBitSegment's fields they read).
struct Span {
  int64_t offset;        // into values
  int64_t length;        // elements of values
  int64_t padded;        // elements after zero padding
  int64_t error_offset;  // worker: its padded run in the worker error; server: its chunk
  int64_t byte_offset;   // its chunk's signs in a block
};
struct Batch {
  Span span[kSegmentsPerLaunch];
  // Span s owns the launch's blocks [first_block[s], first_block[s + 1]).
  int32_t first_block[kSegmentsPerLaunch + 1];
  int32_t count;
  int32_t first_segment;  // the layout's index of span[0] (its scale's index)
  int64_t first_slot;     // the scratch slot of the launch's block 0 (sums and scales)
};
// Kernel parameters are limited to 4 KiB; the pointers and sizes beside the batch take < 100 B.
static_assert(sizeof(Batch) <= 3584, "a launch's segments must fit the kernel parameters");

struct Geometry {
  int world;
  int64_t segments;     // the layout's segment count (the row length of the gathered scales)
  int64_t block_bytes;  // bytes of one block of signs (one chunk of every segment)
};

// The span of this block and its first byte within the span's bytes.
struct Place {
  int s;
  int64_t first_byte;
};
__device__ __forceinline__ Place locate(const Batch& batch) {
  int lo = 0, hi = batch.count - 1;  // the last span whose first block is <= blockIdx.x
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_block[mid] <= static_cast<int32_t>(blockIdx.x)) lo = mid; else hi = mid - 1;
  }
  return {lo, int64_t{static_cast<int32_t>(blockIdx.x) - batch.first_block[lo]} * kBytesPerBlock};
}

// DeepSpeed's sign().add_(1).bool(): true for x >= 0, +0, -0 and NaN.
__device__ __forceinline__ bool sign_bit(float x) { return !(x < 0.0f); }

// ---- worker side ---------------------------------------------------------------------------

// Element i of segment `seg` plus its error (the padding is zeros plus its own error).
__device__ __forceinline__ float compensated(const float* values, const float* error,
                                             const Span& seg, int64_t i) {
  return (i < seg.length ? values[seg.offset + i] : 0.0f) + error[seg.error_offset + i];
}

// kSigns false: slot[block] = the f64 sum of squares of the block's compensated elements.
// kSigns true: the errors and sign bytes with the segment's scale (written by the scales pass).
template <bool kSigns>
__global__ void __launch_bounds__(kThreads)
    worker_pass(double* __restrict__ slot, uint8_t* __restrict__ bits,
                const float* __restrict__ scales, float* __restrict__ error,
                const float* __restrict__ values, Batch batch, Geometry geo) {
  const Place at = locate(batch);
  const Span seg = batch.span[at.s];
  const int64_t end = min(seg.padded / 8, at.first_byte + kBytesPerBlock);
  float scale = 0.0f;
  if constexpr (kSigns) scale = scales[batch.first_segment + at.s];
  double sum = 0.0;
  for (int64_t q = at.first_byte + threadIdx.x; q < end; q += kThreads) {
    unsigned byte = 0;
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int64_t i = 8 * q + l;
      const float b = compensated(values, error, seg, i);
      if constexpr (kSigns) {
        const bool positive = sign_bit(b);
        error[seg.error_offset + i] = b - scale * (positive ? 1.0f : -1.0f);
        byte |= positive ? 0x80u >> l : 0u;
      } else {
        const double d = b;
        sum += d * d;
      }
    }
    if constexpr (kSigns) {
      // The byte lies wholly in chunk r: chunks are whole bytes.
      const int64_t chunk = seg.padded / geo.world;
      const int64_t r = 8 * q / chunk;
      bits[r * geo.block_bytes + seg.byte_offset + q - r * (chunk / 8)] =
          static_cast<uint8_t>(byte);
    }
  }
  if constexpr (!kSigns) {
    __shared__ double shared[kWarp];
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) slot[batch.first_slot + blockIdx.x] = sum;
  }
}

// ---- server side ---------------------------------------------------------------------------

// The 8 averaged values of byte q of the served chunk of segment `seg` (of layout index k):
// sum over ranks in rank order of +-float(scale_r * (1 / world)), then the chunk's error.
__device__ __forceinline__ void averaged(float (&c)[8], const uint8_t* bits_in,
                                         const float* scales_in, const float* error,
                                         const Span& seg, int64_t k, int64_t q, float inv_world,
                                         const Geometry& geo) {
#pragma unroll
  for (int l = 0; l < 8; ++l) c[l] = 0.0f;
  for (int r = 0; r < geo.world; ++r) {
    const float w = scales_in[r * geo.segments + k] * inv_world;
    const unsigned byte = bits_in[r * geo.block_bytes + seg.byte_offset + q];
#pragma unroll
    for (int l = 0; l < 8; ++l) c[l] += ((byte >> (7 - l)) & 1u) != 0 ? w : -w;
  }
#pragma unroll
  for (int l = 0; l < 8; ++l) c[l] = c[l] + error[seg.error_offset + 8 * q + l];
}

template <bool kSigns>
__global__ void __launch_bounds__(kThreads)
    server_pass(double* __restrict__ slot, uint8_t* __restrict__ bits_out,
                const float* __restrict__ scales_out, float* __restrict__ error,
                const uint8_t* __restrict__ bits_in, const float* __restrict__ scales_in,
                float inv_world, Batch batch, Geometry geo) {
  const Place at = locate(batch);
  const Span seg = batch.span[at.s];
  const int64_t k = batch.first_segment + at.s;
  const int64_t end = min(seg.padded / geo.world / 8, at.first_byte + kBytesPerBlock);
  float scale = 0.0f;
  if constexpr (kSigns) scale = scales_out[k];
  double sum = 0.0;
  for (int64_t q = at.first_byte + threadIdx.x; q < end; q += kThreads) {
    float c[8];
    averaged(c, bits_in, scales_in, error, seg, k, q, inv_world, geo);
    unsigned byte = 0;
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      if constexpr (kSigns) {
        const bool positive = sign_bit(c[l]);
        error[seg.error_offset + 8 * q + l] = c[l] - scale * (positive ? 1.0f : -1.0f);
        byte |= positive ? 0x80u >> l : 0u;
      } else {
        const double d = c[l];
        sum += d * d;
      }
    }
    if constexpr (kSigns) bits_out[seg.byte_offset + q] = static_cast<uint8_t>(byte);
  }
  if constexpr (!kSigns) {
    __shared__ double shared[kWarp];
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) slot[batch.first_slot + blockIdx.x] = sum;
  }
}

// ---- both sides: the scales ------------------------------------------------------------------

// One block per span: scale = ||x|| / sqrt(count) from the span's slots, count being the padded
// length (worker) or the chunk (server), in f64 and rounded to f32 once, as the CPU computes it.
__global__ void __launch_bounds__(kScaleThreads)
    scales_pass(float* __restrict__ scales, const double* __restrict__ slot, Batch batch,
                int world_divisor) {
  __shared__ double shared[kWarp];
  const Span seg = batch.span[blockIdx.x];
  const int64_t first = batch.first_slot + batch.first_block[blockIdx.x];
  const int64_t last = batch.first_slot + batch.first_block[blockIdx.x + 1];
  double sum = 0.0;
  for (int64_t b = first + threadIdx.x; b < last; b += kScaleThreads) sum += slot[b];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const auto count = static_cast<double>(seg.padded / world_divisor);
    scales[batch.first_segment + blockIdx.x] = static_cast<float>(sqrt(sum) / sqrt(count));
  }
}

// ---- decompression -------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    decompress_pass(float* __restrict__ values, const uint8_t* __restrict__ bits,
                    const float* __restrict__ scales, Batch batch, Geometry geo) {
  const Place at = locate(batch);
  const Span seg = batch.span[at.s];
  const int64_t k = batch.first_segment + at.s;
  const int64_t end = min((seg.length + 7) / 8, at.first_byte + kBytesPerBlock);
  const int64_t chunk = seg.padded / geo.world;
  for (int64_t q = at.first_byte + threadIdx.x; q < end; q += kThreads) {
    const int64_t r = 8 * q / chunk;
    const float scale = scales[r * geo.segments + k];
    const unsigned byte = bits[r * geo.block_bytes + seg.byte_offset + q - r * (chunk / 8)];
    const int64_t count = min(int64_t{8}, seg.length - 8 * q);  // the segment's last byte
    for (int l = 0; l < count; ++l) {
      values[seg.offset + 8 * q + l] = ((byte >> (7 - l)) & 1u) != 0 ? scale : -scale;
    }
  }
}

// ---- host side -----------------------------------------------------------------------------

// The sign bytes each kernel walks in a segment.
enum class Walk { kWorker, kServer, kDecompress };
int64_t bytes_walked(const OneBitLayout& layout, const OneBitSegment& s, Walk walk) {
  switch (walk) {
    case Walk::kWorker: return s.padded / 8;
    case Walk::kServer: return layout.chunk(s) / 8;
    case Walk::kDecompress: return (s.length + 7) / 8;
  }
  return 0;
}

int64_t blocks_of(int64_t bytes) { return (bytes + kBytesPerBlock - 1) / kBytesPerBlock; }

// Calls launch(batch, blocks) for each run of at most kSegmentsPerLaunch segments; the batches'
// slots follow one another in scratch.
template <typename Launch>
void for_each_batch(const OneBitLayout& layout, Walk walk, Launch&& launch) {
  const int64_t segments = layout.segment_count();
  ZERO_CHECK(segments <= INT32_MAX, "1-bit compression: " << segments << " segments");
  int64_t slots = 0;
  for (int64_t first = 0; first < segments; first += kSegmentsPerLaunch) {
    Batch batch{};
    const int64_t count = std::min<int64_t>(kSegmentsPerLaunch, segments - first);
    int64_t blocks = 0;
    for (int64_t s = 0; s < count; ++s) {
      const OneBitSegment& in = layout.segments[static_cast<size_t>(first + s)];
      batch.span[s] = Span{in.offset, in.length, in.padded,
                           walk == Walk::kServer ? in.chunk_offset : in.error_offset,
                           in.byte_offset};
      batch.first_block[s] = static_cast<int32_t>(blocks);
      blocks += blocks_of(bytes_walked(layout, in, walk));
      ZERO_CHECK(blocks <= INT32_MAX, "1-bit compression: " << blocks << " blocks in one launch");
    }
    batch.first_block[count] = static_cast<int32_t>(blocks);
    batch.count = static_cast<int32_t>(count);
    batch.first_segment = static_cast<int32_t>(first);
    batch.first_slot = slots;
    slots += blocks;
    if (blocks > 0) launch(batch, static_cast<unsigned>(blocks));
  }
}

size_t slots_bytes(const OneBitLayout& layout, Walk walk) {
  int64_t slots = 0;
  for (const OneBitSegment& s : layout.segments) slots += blocks_of(bytes_walked(layout, s, walk));
  return static_cast<size_t>(std::max<int64_t>(slots, 1)) * sizeof(double);
}

Geometry geometry_of(const OneBitLayout& layout) {
  return Geometry{layout.world, layout.segment_count(), layout.block_bytes};
}

}  // namespace

size_t onebit_worker_scratch_bytes(const OneBitLayout& layout) {
  return slots_bytes(layout, Walk::kWorker);
}

size_t onebit_server_scratch_bytes(const OneBitLayout& layout) {
  return slots_bytes(layout, Walk::kServer);
}

void launch_onebit_worker_compress(uint8_t* bits, float* scales, float* worker_error,
                                   const float* values, const OneBitLayout& layout,
                                   void* scratch, cudaStream_t stream) {
  auto* slot = static_cast<double*>(scratch);
  const Geometry geo = geometry_of(layout);
  for_each_batch(layout, Walk::kWorker, [&](const Batch& batch, unsigned blocks) {
    worker_pass<false><<<blocks, kThreads, 0, stream>>>(slot, bits, scales, worker_error, values,
                                                       batch, geo);
    ZERO_CUDA_CHECK_LAUNCH();
    scales_pass<<<static_cast<unsigned>(batch.count), kScaleThreads, 0, stream>>>(scales, slot,
                                                                                  batch, 1);
    ZERO_CUDA_CHECK_LAUNCH();
    worker_pass<true><<<blocks, kThreads, 0, stream>>>(slot, bits, scales, worker_error, values,
                                                      batch, geo);
    ZERO_CUDA_CHECK_LAUNCH();
  });
}

void launch_onebit_server_compress(uint8_t* bits_out, float* scales_out, float* server_error,
                                   const uint8_t* bits_in, const float* scales_in,
                                   const OneBitLayout& layout, void* scratch,
                                   cudaStream_t stream) {
  auto* slot = static_cast<double*>(scratch);
  const Geometry geo = geometry_of(layout);
  // DeepSpeed multiplies each worker's scale by the f32 of 1 / world (as the CPU does).
  const auto inv_world = static_cast<float>(1.0 / layout.world);
  for_each_batch(layout, Walk::kServer, [&](const Batch& batch, unsigned blocks) {
    server_pass<false><<<blocks, kThreads, 0, stream>>>(slot, bits_out, scales_out, server_error,
                                                       bits_in, scales_in, inv_world, batch, geo);
    ZERO_CUDA_CHECK_LAUNCH();
    scales_pass<<<static_cast<unsigned>(batch.count), kScaleThreads, 0, stream>>>(
        scales_out, slot, batch, layout.world);
    ZERO_CUDA_CHECK_LAUNCH();
    server_pass<true><<<blocks, kThreads, 0, stream>>>(slot, bits_out, scales_out, server_error,
                                                      bits_in, scales_in, inv_world, batch, geo);
    ZERO_CUDA_CHECK_LAUNCH();
  });
}

void launch_onebit_decompress(float* values, const uint8_t* bits, const float* scales,
                              const OneBitLayout& layout, cudaStream_t stream) {
  const Geometry geo = geometry_of(layout);
  for_each_batch(layout, Walk::kDecompress, [&](const Batch& batch, unsigned blocks) {
    decompress_pass<<<blocks, kThreads, 0, stream>>>(values, bits, scales, batch, geo);
    ZERO_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zero::backend::cuda
