// CPU embedding forward (row gather) and backward (row scatter-add). Ids are validated in one
// serial pass before any write, so a bad id leaves every output untouched. The backward splits
// the channel dimension across threads: each thread owns whole columns of dtable and visits the
// tokens in order, so no two threads touch one element and every sum has a fixed order.
#include "backend/cpu/cpu_embedding.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

// Checks table [V, C], ids (i32/i64) and rows [..., C] with one row per id.
void check_shapes(const Tensor& rows, const char* rows_name, const Tensor& ids,
                  const Tensor& table, const char* table_name, const char* op) {
  expect_host_contiguous(rows, op, rows_name);
  expect_host_contiguous(ids, op, "ids");
  expect_host_contiguous(table, op, table_name);
  if (ids.dtype() != DType::kI32 && ids.dtype() != DType::kI64) {
    throw ShapeError(std::string(op) + ": ids " + ids.describe() + " must be i32 or i64");
  }
  if (rows.dtype() != table.dtype()) {
    throw ShapeError(std::string(op) + ": " + rows_name + " " + rows.describe() + " and " +
                     table_name + " " + table.describe() + " must have the same dtype");
  }
  int64_t leading = 1;
  for (int64_t d = 0; d + 1 < rows.dim(); ++d) leading *= rows.size(d);
  if (table.dim() != 2 || rows.dim() < 1 || rows.size(-1) != table.size(1) ||
      leading != ids.numel()) {
    throw ShapeError(std::string(op) + ": " + rows_name + " " + shape_to_string(rows.shape()) +
                     ", ids " + shape_to_string(ids.shape()) + " and " + table_name + " " +
                     shape_to_string(table.shape()) + " do not fit; need " + table_name +
                     " [V, C], one id per row and " + rows_name + " [..., C]");
  }
}

template <typename Id>
void check_ids(const Id* ids, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= vocab) [[unlikely]] {
      throw Error("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) +
                  "); check the tokenizer and the model's vocab_size");
    }
  }
}

// Calls fn.template operator()<Id>() with the C type of an i32/i64 ids tensor.
template <typename Fn>
void dispatch_ids(const Tensor& ids, Fn&& fn) {
  if (ids.dtype() == DType::kI64) {
    fn.template operator()<int64_t>();
  } else {
    fn.template operator()<int32_t>();
  }
}

}  // namespace

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table, bool accumulate) {
  const char* op = "embedding_forward";
  check_shapes(out, "out", ids, table, "table", op);
  const int64_t n = ids.numel();
  const int64_t vocab = table.size(0);
  const int64_t channels = table.size(1);
  dispatch_floating(table.dtype(), op, [&]<typename T>() {
    dispatch_ids(ids, [&]<typename Id>() {
      const Id* id = ids.data<Id>();
      check_ids(id, n, vocab);
      const T* td = table.data<T>();
      T* od = out.data<T>();
#pragma omp parallel for schedule(static) if (n * channels >= (int64_t{1} << 15))
      for (int64_t i = 0; i < n; ++i) {
        const T* src = td + static_cast<int64_t>(id[i]) * channels;
        T* dst = od + i * channels;
        if (accumulate) {
#pragma omp simd
          for (int64_t c = 0; c < channels; ++c) dst[c] += src[c];
        } else {
#pragma omp simd
          for (int64_t c = 0; c < channels; ++c) dst[c] = src[c];
        }
      }
    });
  });
}

void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  const char* op = "embedding_backward";
  check_shapes(dout, "dout", ids, dtable, "dtable", op);
  const int64_t n = ids.numel();
  const int64_t vocab = dtable.size(0);
  const int64_t channels = dtable.size(1);
  // One contiguous column block per thread, a multiple of 16 wide (whole cache lines of f32).
  const int64_t threads = std::max(1, omp_get_max_threads());
  int64_t block = (channels + threads - 1) / threads;
  block = std::max<int64_t>(16, (block + 15) / 16 * 16);
  const int64_t blocks = channels == 0 ? 0 : (channels + block - 1) / block;
  dispatch_floating(dtable.dtype(), op, [&]<typename T>() {
    dispatch_ids(ids, [&]<typename Id>() {
      const Id* id = ids.data<Id>();
      check_ids(id, n, vocab);
      const T* gd = dout.data<T>();
      T* td = dtable.data<T>();
#pragma omp parallel for schedule(static) if (blocks > 1 && n * channels >= (int64_t{1} << 15))
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t c0 = b * block;
        const int64_t width = std::min(block, channels - c0);
        for (int64_t i = 0; i < n; ++i) {
          const T* src = gd + i * channels + c0;
          T* dst = td + static_cast<int64_t>(id[i]) * channels + c0;
#pragma omp simd
          for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
        }
      }
    });
  });
}

}  // namespace zero::backend::cpu
