// 1-bit Adam's compressed all-reduce for W ranks run in one process with the CPU backend's
// onebit ops, the exchanges done by copying blocks: what CompressedAllReduce over W real ranks
// must produce, bit for bit (the single-process and multi-rank tests hold it to that).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/onebit_layout.h"

namespace zero::testing::onebit {

// Every rank's error-feedback buffers, zero at the start.
struct RankErrors {
  std::vector<Tensor> worker;
  std::vector<Tensor> server;
};

inline RankErrors zero_errors(const backend::OneBitLayout& layout) {
  RankErrors errors;
  for (int r = 0; r < layout.world; ++r) {
    errors.worker.push_back(Tensor::zeros_host({layout.worker_elements}, DType::kF32));
    errors.server.push_back(Tensor::zeros_host({layout.server_elements}, DType::kF32));
  }
  return errors;
}

// One compressed all-reduce of values[r] (rank r's f32 buffer) for every rank, in place.
inline void emulate(backend::CpuBackend& cpu, const backend::OneBitLayout& layout,
                    std::vector<Tensor>& values, RankErrors& errors) {
  const int world = layout.world;
  const int64_t block = layout.block_bytes, segments = layout.segment_count();
  std::vector<Tensor> bits, scales;
  for (int r = 0; r < world; ++r) {
    bits.push_back(Tensor::zeros_host({world * block}, DType::kU8));
    scales.push_back(Tensor::zeros_host({segments}, DType::kF32));
    cpu.onebit_worker_compress(bits.back(), scales.back(), errors.worker[r], values[r], layout);
  }
  Tensor all_worker_scales = Tensor::zeros_host({world * segments}, DType::kF32);
  for (int r = 0; r < world; ++r) {
    std::memcpy(all_worker_scales.data<float>() + r * segments, scales[r].data<float>(),
                static_cast<size_t>(segments) * sizeof(float));
  }
  Tensor server_bits = Tensor::zeros_host({world * block}, DType::kU8);
  Tensor server_scales = Tensor::zeros_host({world * segments}, DType::kF32);
  for (int q = 0; q < world; ++q) {
    // Server q receives block q of every rank's signs (the all-to-all).
    Tensor served = Tensor::zeros_host({world * block}, DType::kU8);
    for (int r = 0; r < world; ++r) {
      std::memcpy(served.data<uint8_t>() + r * block, bits[r].data<uint8_t>() + q * block,
                  static_cast<size_t>(block));
    }
    Tensor out_bits = server_bits.view(q * block, {block});
    Tensor out_scales = server_scales.view(q * segments, {segments});
    cpu.onebit_server_compress(out_bits, out_scales, errors.server[q], served,
                               all_worker_scales, layout);
  }
  for (int r = 0; r < world; ++r) {
    cpu.onebit_decompress(values[r], server_bits, server_scales, layout);
  }
}

}  // namespace zero::testing::onebit
