// KvCache: the keys and values of every position a generation has run so far, one pair of
// [B, capacity, KVH, D] tensors per transformer block, on the backend's device. A forward with
// StepContext::kv_cache set appends its positions (each block writes its keys and values after
// the rotary embedding) and attends over everything cached; the caller advances length() once
// the whole model ran.
//
// Memory: 2 * layers * B * capacity * KVH * D elements of `dtype`, allocated once up front under
// MemoryCategory::kActivations (the cache is what inference keeps instead of activations), so a
// run that does not fit fails before the first token. Ownership: owns its tensors; the backend
// must outlive it. One thread drives it.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/transformer_config.h"

namespace zero::model {

class KvCache {
 public:
  // For `config`'s blocks (its num_layers, num_kv_heads, head_dim). capacity: the most
  // positions a sequence may reach (prompt + generated tokens); ShapeError when it is not
  // positive or batch_size is not.
  KvCache(backend::Backend& backend, const TransformerConfig& config, int64_t batch_size,
          int64_t capacity, DType dtype);

  // The bytes a cache of this shape allocates (what to check against the device before making
  // one).
  static int64_t bytes_for(const TransformerConfig& config, int64_t batch_size, int64_t capacity,
                           DType dtype);

  int64_t batch_size() const { return batch_size_; }
  int64_t capacity() const { return capacity_; }
  DType dtype() const { return dtype_; }
  // Positions already cached (the next forward's first position).
  int64_t length() const { return length_; }
  // Records that the last forward cached `positions` more positions (ShapeError past capacity).
  void advance(int64_t positions);
  // Forgets every position (the tensors stay allocated for the next prompt).
  void clear() { length_ = 0; }
  // Every sequence of this cache takes the positions of `one`, a cache of a single sequence of
  // the same model and dtype (a prompt run once for several continuations): length() becomes
  // one.length(). ShapeError when `one` holds more sequences or positions than fit.
  void replicate(backend::Backend& backend, KvCache& one);

  // Block `layer`'s caches [B, capacity, KVH, D].
  Tensor& keys(int64_t layer);
  Tensor& values(int64_t layer);

 private:
  int64_t batch_size_;
  int64_t capacity_;
  DType dtype_;
  int64_t length_ = 0;
  std::vector<Tensor> keys_, values_;
};

}  // namespace zero::model
