#include "model/kv_cache.h"

#include <string>
#include <utility>

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

void KvCache::replicate(backend::Backend& backend, KvCache& one) {
  if (one.batch_size() != 1 || one.length() > capacity_ || one.dtype() != dtype_ ||
      one.keys_.size() != keys_.size()) {
    throw ShapeError("a key/value cache replicates a one-sequence cache of its model, dtype and "
                     "at most " + std::to_string(capacity_) + " positions; got " +
                     std::to_string(one.batch_size()) + " sequences of " +
                     std::to_string(one.length()) + " positions");
  }
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    for (auto [from, to] : {std::pair<Tensor*, Tensor*>{&one.keys_[layer], &keys_[layer]},
                            std::pair<Tensor*, Tensor*>{&one.values_[layer], &values_[layer]}}) {
      // The one sequence's first length() positions, seen batch_size() times (batch stride 0).
      const Tensor& source = *from;
      const Tensor broadcast(source.storage(), source.dtype(),
                             {batch_size_, one.length(), source.size(2), source.size(3)},
                             {0, source.stride(1), source.stride(2), source.stride(3)},
                             source.offset());
      backend.kv_cache_write(*to, broadcast, 0);
    }
  }
  length_ = one.length();
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
