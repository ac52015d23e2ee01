#include "model/rope_table.h"

#include <cmath>
#include <vector>

namespace zero::model {

RopeTable build_rope_table(backend::Backend& backend, int64_t seq_len, int64_t head_dim,
                           double theta, DType dtype) {
  const int64_t half = head_dim / 2;
  Tensor cos_host = Tensor::zeros_host({seq_len, half}, DType::kF64);
  Tensor sin_host = Tensor::zeros_host({seq_len, half}, DType::kF64);
  std::vector<float> inv_freq(static_cast<size_t>(half));
  const auto theta_f = static_cast<float>(theta);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta_f, exponent);
  }
  for (int64_t t = 0; t < seq_len; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = inv_freq[static_cast<size_t>(i)] * static_cast<float>(t);
      cos_host.data<double>()[t * half + i] = std::cos(static_cast<double>(angle));
      sin_host.data<double>()[t * half + i] = std::sin(static_cast<double>(angle));
    }
  }
  RopeTable table;
  table.seq_len = seq_len;
  table.cos = backend.empty({seq_len, half}, dtype, MemoryCategory::kWorkspace);
  table.sin = backend.empty({seq_len, half}, dtype, MemoryCategory::kWorkspace);
  // Host f64 -> device dtype: stage on the host in the target dtype, then upload.
  Tensor cos_staged = Tensor::zeros_host({seq_len, half}, dtype);
  Tensor sin_staged = Tensor::zeros_host({seq_len, half}, dtype);
  for (int64_t i = 0; i < seq_len * half; ++i) {
    if (dtype == DType::kF64) {
      cos_staged.data<double>()[i] = cos_host.data<double>()[i];
      sin_staged.data<double>()[i] = sin_host.data<double>()[i];
    } else {
      cos_staged.data<float>()[i] = static_cast<float>(cos_host.data<double>()[i]);
      sin_staged.data<float>()[i] = static_cast<float>(sin_host.data<double>()[i]);
    }
  }
  backend.copy_from_host(table.cos, cos_staged.raw_data());
  backend.copy_from_host(table.sin, sin_staged.raw_data());
  return table;
}

}  // namespace zero::model
