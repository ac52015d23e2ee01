#include "model/kv_cache.h"

#include <string>

#include "core/check.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace zero::model {

KvCache::KvCache(backend::Backend& backend, const TransformerConfig& config, int64_t batch_size,
                 int64_t capacity, DType dtype)
    : batch_size_(batch_size), capacity_(capacity), dtype_(dtype) {
  if (batch_size < 1 || capacity < 1) {
    throw ShapeError("a key/value cache needs at least one sequence and one position, got " +
                     std::to_string(batch_size) + " sequences of " + std::to_string(capacity));
  }
  bytes_for(config, batch_size, capacity, dtype);  // throws when the size overflows
  const Shape shape{batch_size, capacity, config.num_kv_heads, config.head_dim};
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    keys_.push_back(backend.zeros(shape, dtype, MemoryCategory::kActivations));
    values_.push_back(backend.zeros(shape, dtype, MemoryCategory::kActivations));
  }
}

int64_t KvCache::bytes_for(const TransformerConfig& config, int64_t batch_size, int64_t capacity,
                           DType dtype) {
  return checked_product({2, config.num_layers, batch_size, capacity, config.num_kv_heads,
                          config.head_dim, static_cast<int64_t>(dtype_size(dtype))},
                         "the key/value cache's size in bytes");
}

void KvCache::advance(int64_t positions) {
  if (positions < 0 || positions > capacity_ - length_) {
    throw ShapeError("the key/value cache holds " + std::to_string(capacity_) +
                     " positions; " + std::to_string(length_) + " + " +
                     std::to_string(positions) + " do not fit");
  }
  length_ += positions;
}

Tensor& KvCache::keys(int64_t layer) {
  ZERO_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()),
             "no cache for block " << layer << " of " << keys_.size());
  return keys_[static_cast<size_t>(layer)];
}

Tensor& KvCache::values(int64_t layer) {
  ZERO_CHECK(layer >= 0 && layer < static_cast<int64_t>(values_.size()),
             "no cache for block " << layer << " of " << values_.size());
  return values_[static_cast<size_t>(layer)];
}

}  // namespace zero::model
