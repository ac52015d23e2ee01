#include "backend/cpu/cpu_rope.h"

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {

void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const char* op = "rope_apply";
  if (x.dim() != 4 || x.stride(3) != 1 || !x.device().is_cpu()) {
    throw ShapeError(std::string(op) + ": x must be a CPU [B, T, H, D] view with contiguous D, got " +
                     x.describe());
  }
  const int64_t batch = x.size(0), seq = x.size(1), heads = x.size(2), d = x.size(3);
  const int64_t half = d / 2;
  require_contiguous(cos, op, "cos");
  require_contiguous(sin, op, "sin");
  if (d % 2 != 0 || cos.shape() != Shape{seq, half} || sin.shape() != Shape{seq, half} ||
      cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
    throw ShapeError(std::string(op) + ": cos/sin must be " + dtype_name(x.dtype()) + "[" +
                     std::to_string(seq) + ", " + std::to_string(half) + "] for x " + x.describe() +
                     ", got " + cos.describe() + " and " + sin.describe());
  }
  const int64_t sb = x.stride(0), st = x.stride(1), sh = x.stride(2);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    T* base = x.data<T>();
    const T* cs = cos.data<T>();
    const T* sn = sin.data<T>();
    const T sign = inverse ? static_cast<T>(-1) : static_cast<T>(1);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < seq; ++t) {
        const T* c_row = cs + t * half;
        const T* s_row = sn + t * half;
        for (int64_t h = 0; h < heads; ++h) {
          T* v = base + b * sb + t * st + h * sh;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) {
            const T lo = v[i], hi = v[i + half];
            const T s = sign * s_row[i];
            v[i] = lo * c_row[i] - hi * s;
            v[i + half] = hi * c_row[i] + lo * s;
          }
        }
      }
    }
  });
}

}  // namespace zero::backend::cpu
