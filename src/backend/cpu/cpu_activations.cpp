#include "backend/cpu/cpu_activations.h"

#include <cmath>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {
namespace {

// sqrt(2 / pi), the GELU tanh-approximation constant.
constexpr double kGeluScale = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

void check_elementwise(const char* op, const Tensor& a, const Tensor& b) {
  require_contiguous(a, op, "output");
  require_contiguous(b, op, "input");
  require_same_shape(a, b, op, "output", "input");
  require_dtype(a, b.dtype(), op, "output");
}

void check_swiglu(const char* op, const Tensor& y, const Tensor& gate_up, int64_t* rows,
                  int64_t* inner) {
  require_contiguous(y, op, "y");
  require_contiguous(gate_up, op, "gate_up");
  require_dtype(y, gate_up.dtype(), op, "y");
  int64_t width = 0;
  rows_and_channels(gate_up, rows, &width);
  int64_t y_rows = 0;
  rows_and_channels(y, &y_rows, inner);
  if (y_rows != *rows || width != 2 * *inner) {
    throw ShapeError(std::string(op) + ": gate_up " + shape_to_string(gate_up.shape()) +
                     " must be [N, 2I] for y " + shape_to_string(y.shape()) + " = [N, I]");
  }
}

}  // namespace

void gelu_forward(Tensor& y, const Tensor& x) {
  check_elementwise("gelu_forward", y, x);
  dispatch_floating(x.dtype(), "gelu_forward", [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const int64_t n = x.numel();
    const T k = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T v = in[i];
      out[i] = static_cast<T>(0.5) * v * (static_cast<T>(1) + std::tanh(k * (v + a * v * v * v)));
    }
  });
}

void gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  check_elementwise("gelu_backward", dx, x);
  check_elementwise("gelu_backward", dy, x);
  dispatch_floating(x.dtype(), "gelu_backward", [&]<typename T>() {
    const T* in = x.data<T>();
    const T* g = dy.data<T>();
    T* out = dx.data<T>();
    const int64_t n = x.numel();
    const T k = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T v = in[i];
      const T t = std::tanh(k * (v + a * v * v * v));
      const T dt = k * (static_cast<T>(1) + static_cast<T>(3) * a * v * v) * (static_cast<T>(1) - t * t);
      out[i] = g[i] * (static_cast<T>(0.5) * (static_cast<T>(1) + t) + static_cast<T>(0.5) * v * dt);
    }
  });
}

void swiglu_forward(Tensor& y, const Tensor& gate_up) {
  int64_t rows = 0, inner = 0;
  check_swiglu("swiglu_forward", y, gate_up, &rows, &inner);
  dispatch_floating(y.dtype(), "swiglu_forward", [&]<typename T>() {
    const T* in = gate_up.data<T>();
    T* out = y.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* gate = in + r * 2 * inner;
      const T* up = gate + inner;
      T* o = out + r * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) {
        const T sig = static_cast<T>(1) / (static_cast<T>(1) + std::exp(-gate[i]));
        o[i] = gate[i] * sig * up[i];
      }
    }
  });
}

void swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) {
  int64_t rows = 0, inner = 0;
  check_swiglu("swiglu_backward", dy, gate_up, &rows, &inner);
  require_contiguous(dgate_up, "swiglu_backward", "dgate_up");
  require_same_shape(dgate_up, gate_up, "swiglu_backward", "dgate_up", "gate_up");
  require_dtype(dgate_up, gate_up.dtype(), "swiglu_backward", "dgate_up");
  dispatch_floating(dy.dtype(), "swiglu_backward", [&]<typename T>() {
    const T* in = gate_up.data<T>();
    const T* g = dy.data<T>();
    T* out = dgate_up.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* gate = in + r * 2 * inner;
      const T* up = gate + inner;
      const T* gr = g + r * inner;
      T* dgate = out + r * 2 * inner;
      T* dup = dgate + inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) {
        const T sig = static_cast<T>(1) / (static_cast<T>(1) + std::exp(-gate[i]));
        const T silu = gate[i] * sig;
        dup[i] = gr[i] * silu;
        dgate[i] = gr[i] * up[i] * sig * (static_cast<T>(1) + gate[i] * (static_cast<T>(1) - sig));
      }
    }
  });
}

}  // namespace zero::backend::cpu
