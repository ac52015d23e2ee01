// Shared by the tests that hold the activation estimate against the allocator: the
// tiny-Llama shape at a chosen vocabulary, a batch of ids, and the kActivations peak of one
// training forward + backward.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/transformer_builder.h"

namespace zero::sharding::measurement {

// tiny-llama (hidden 128, 4 layers, FFN 352, 4 heads / 2 KV heads) with `vocab` rows and
// positions for any tested length.
inline model::TransformerConfig tiny_llama(int64_t vocab) {
  model::TransformerConfig c = model::preset_config("tiny-llama");
  c.vocab_size = vocab;
  c.max_position_embeddings = 1 << 16;
  return c;
}

// One sequence of `seq_len` ids below `vocab` (labels: the ids, shifted inside).
inline model::Batch id_batch(int64_t seq_len, int64_t vocab) {
  Tensor ids = Tensor::zeros_host({1, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 13 + 5) % vocab;
  return model::batch_from_input_ids(ids);
}

// Bytes of kActivations alive at the peak of `net`'s forward + backward on `batch` (`cpu`: the
// backend `net` was built on).
inline int64_t activation_peak(backend::CpuBackend& cpu, model::Model& net,
                               const model::Batch& batch) {
  cpu.allocator().reset_peaks();
  const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
  net.forward_backward(batch);
  return static_cast<int64_t>(cpu.allocator().stats().peak(MemoryCategory::kActivations) - before);
}

}  // namespace zero::sharding::measurement
