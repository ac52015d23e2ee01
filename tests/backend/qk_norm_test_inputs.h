// Shared by the query/key RMSNorm op tests (test_qk_norm_ops.cpp on the CPU backends,
// test_cuda_qk_norm.cpp against them): a call's shape, its random inputs, the bad-call check.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend_test_values.h"
#include "core/error.h"

namespace zero::backend::qk_norm_test {

// N rows (tokens) of H query, KVH key and KVH value heads of D elements.
struct QkShape {
  int64_t rows, heads, kv_heads, dim;
  int64_t per_row() const { return heads + 2 * kv_heads; }
  int64_t normed() const { return heads + kv_heads; }
  int64_t columns() const { return per_row() * dim; }
  int64_t numel() const { return rows * columns(); }
};

// Inputs of one call from seeds seed .. seed + 5: x in [-2, 2], the weights in [0.5, 1.5] (as
// trained norm weights: near one), dy and the weight gradients' start values in [-1, 1].
struct QkInputs {
  std::vector<float> x, wq, wk, dy, dq_start, dk_start;
  QkInputs(const QkShape& s, uint32_t seed)
      : x(backend_test::random_values(s.numel(), seed, -2.0f, 2.0f)),
        wq(backend_test::random_values(s.dim, seed + 1, 0.5f, 1.5f)),
        wk(backend_test::random_values(s.dim, seed + 2, 0.5f, 1.5f)),
        dy(backend_test::random_values(s.numel(), seed + 3)),
        dq_start(backend_test::random_values(s.dim, seed + 4)),
        dk_start(backend_test::random_values(s.dim, seed + 5)) {}
};

// Runs `call`, which must throw ShapeError whose message contains every one of `names`.
inline void expect_shape_error(const std::function<void()>& call,
                               const std::vector<std::string>& names, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    for (const std::string& name : names) {
      EXPECT_NE(message.find(name), std::string::npos) << what << ": " << message;
    }
  }
}

}  // namespace zero::backend::qk_norm_test
