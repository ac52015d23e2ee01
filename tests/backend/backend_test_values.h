// Backend test values, for any backend (the CPU oracle, the simulated device, CUDA): random
// inputs, uploads of the same values in any storage dtype, downloads widened to double or as raw
// bytes, and per-dtype comparisons with stated tolerances.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/half.h"

namespace zero::backend::backend_test {

inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// `values` stored in `dtype` (rounded to nearest-even for 16-bit) as raw host bytes.
inline std::vector<uint8_t> host_bytes(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        break;
      case DType::kF64: {
        const double d = values[i];
        std::memcpy(bytes.data() + 8 * i, &d, 8);
        break;
      }
      case DType::kBF16: {
        const uint16_t b = float_to_bf16_bits(values[i]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t b = float_to_f16_bits(values[i]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
        break;
      }
      default:
        ADD_FAILURE() << "host_bytes: not a floating dtype";
    }
  }
  return bytes;
}

// A new tensor of `backend` holding `values` in `dtype`.
inline Tensor upload(Backend& backend, const std::vector<float>& values, const Shape& shape,
                     DType dtype) {
  Tensor t = backend.empty(shape, dtype, MemoryCategory::kOther);
  const std::vector<uint8_t> bytes = host_bytes(values, dtype);
  backend.copy_from_host(t, bytes.data());
  return t;
}

template <typename Id>
Tensor upload_ids(Backend& backend, const std::vector<Id>& ids) {
  Tensor t = backend.empty({static_cast<int64_t>(ids.size())},
                           sizeof(Id) == 8 ? DType::kI64 : DType::kI32, MemoryCategory::kOther);
  backend.copy_from_host(t, ids.data());
  return t;
}

// i32 tensors (index tensors: expert ids, dispatch slots) of any shape.
inline Tensor upload_i32(Backend& backend, const std::vector<int32_t>& values,
                         const Shape& shape) {
  Tensor t = backend.empty(shape, DType::kI32, MemoryCategory::kOther);
  backend.copy_from_host(t, values.data());
  return t;
}
inline std::vector<int32_t> download_i32(Backend& backend, const Tensor& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  backend.copy_to_host(out.data(), t);
  return out;
}

// The elements of a contiguous floating tensor, widened to double.
inline std::vector<double> download(Backend& backend, const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  backend.copy_to_host(bytes.data(), t);
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::kF64:
        std::memcpy(&out[i], bytes.data() + 8 * i, 8);
        break;
      case DType::kBF16: {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        out[i] = bf16_bits_to_float(b);
        break;
      }
      case DType::kF16: {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        out[i] = f16_bits_to_float(b);
        break;
      }
      default:
        ADD_FAILURE() << "download: not a floating dtype";
    }
  }
  return out;
}

// The raw bytes of a contiguous tensor (bitwise comparisons).
inline std::vector<uint8_t> download_bytes(Backend& backend, const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  backend.copy_to_host(bytes.data(), t);
  return bytes;
}

// The state tensors an optimizer update of `kind` reads (two moments for Adam and Lamb, one for
// the others): f32 [n], random in [0, 0.01) from seeds `seed`, `seed` + 1 (a second moment must
// not be negative).
inline std::vector<Tensor> random_optimizer_state(Backend& backend, OptimizerKind kind, int64_t n,
                                                  uint32_t seed) {
  const int states = (kind == OptimizerKind::kAdam || kind == OptimizerKind::kLamb) ? 2 : 1;
  std::vector<Tensor> state;
  for (int s = 0; s < states; ++s) {
    state.push_back(upload(backend, random_values(n, seed + static_cast<uint32_t>(s), 0.0f, 0.01f),
                           {n}, DType::kF32));
  }
  return state;
}

// Everything an optimizer update writes, as doubles: the parameters, then each state tensor.
inline std::vector<double> download_update(Backend& backend, const Tensor& params,
                                           const std::vector<Tensor>& state) {
  std::vector<double> out = download(backend, params);
  for (const Tensor& s : state) {
    const std::vector<double> values = download(backend, s);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

// Tolerance of a comparison with the CPU oracle: |gpu - cpu| <= atol + rtol * |cpu|.
struct Tolerance {
  double rtol;
  double atol;
};

// Results stored in a 16-bit dtype may differ from the CPU's by one rounding unit of that
// dtype (the f32 values before the final rounding differ in their last bits - other summation
// orders - and can land on either side of a rounding boundary): bf16 keeps 8 significant bits
// (unit 2^-7 relative at worst), f16 11 (2^-10). f32 results differ only by summation order.
inline Tolerance storage_tolerance(DType dtype, double f32_rtol, double atol) {
  switch (dtype) {
    case DType::kBF16:
      return {1.0 / 128 + f32_rtol, atol + 1.0 / 128 * 1e-2};
    case DType::kF16:
      return {1.0 / 1024 + f32_rtol, atol + 1.0 / 1024 * 1e-2};
    default:
      return {f32_rtol, atol};
  }
}

// The largest |value| (for bounds relative to a tensor's scale).
inline double max_abs(const std::vector<double>& values) {
  double out = 0.0;
  for (double v : values) out = std::max(out, std::fabs(v));
  return out;
}

inline void expect_close(const std::vector<double>& cpu, const std::vector<double>& gpu,
                         Tolerance tol, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double limit = tol.atol + tol.rtol * std::fabs(cpu[i]);
    const bool ok =
        std::fabs(gpu[i] - cpu[i]) <= limit || (std::isnan(cpu[i]) && std::isnan(gpu[i]));
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i] << " (limit "
                    << limit << ")";
    }
  }
}

// cuBLASLt's bias epilogue rounds the f32 product to a 16-bit output type before adding the
// bias (an H200's cuBLASLt 13; the simulator models it): where product and bias cancel, y is
// off the CPU's once-rounded sum by up to a rounding unit of the product, not of y. The limit
// of element (row, col) of a [rows, cols] y therefore grows by that unit of |y - bias[col]|.
inline void expect_close_after_bias_epilogue(const std::vector<double>& cpu,
                                             const std::vector<double>& gpu,
                                             const std::vector<float>& bias, DType dtype,
                                             Tolerance tol, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  ASSERT_FALSE(bias.empty()) << what;
  const double product_unit = dtype == DType::kBF16 ? 1.0 / 128 : dtype == DType::kF16 ? 1.0 / 1024 : 0.0;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double product = cpu[i] - bias[i % bias.size()];
    const double limit =
        tol.atol + tol.rtol * std::fabs(cpu[i]) + product_unit * std::fabs(product);
    if (!(std::fabs(gpu[i] - cpu[i]) <= limit) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i] << " (limit "
                    << limit << ")";
    }
  }
}

inline const char* name_of(DType dtype) { return dtype_name(dtype); }

}  // namespace zero::backend::backend_test
