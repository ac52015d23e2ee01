#include "backend/cpu/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/cpu_dispatch.h"
#include "backend/moe_shapes.h"

namespace zero::backend::cpu {
namespace {

void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t != nullptr && !t->device().is_cpu()) {
      throw ShapeError(std::string(op) + ": " + t->describe() + " is not on the CPU");
    }
  }
}

// The k largest logits of one row (largest first, the lower id first among equals); `order`
// is scratch of `experts` entries, reused across rows.
void top_k(const double* row_logits, int64_t experts, int64_t k, int32_t* ids,
           std::vector<int32_t>& order) {
  for (int64_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return row_logits[a] > row_logits[b] || (row_logits[a] == row_logits[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, ids);
}

// softmax(row) in S (f32 or f64) arithmetic: the maximum, exp(x - max), their sum in order.
template <typename S, typename T>
void softmax_row(const T* row, int64_t experts, std::vector<S>& probs) {
  probs.resize(static_cast<size_t>(experts));
  S max = static_cast<S>(row[0]);
  for (int64_t e = 1; e < experts; ++e) max = std::max(max, static_cast<S>(row[e]));
  S sum = 0;
  for (int64_t e = 0; e < experts; ++e) {
    probs[static_cast<size_t>(e)] = std::exp(static_cast<S>(row[e]) - max);
    sum += probs[static_cast<size_t>(e)];
  }
  for (S& p : probs) p /= sum;
}

}  // namespace

void moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits, bool normalize) {
  const char* op = "moe_route";
  const MoeDims d = check_moe_route(op, expert_ids, weights, logits);
  require_cpu(op, {&expert_ids, &weights, &logits});
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* in = logits.data<T>();
    int32_t* ids = expert_ids.data<int32_t>();
    T* w = weights.data<T>();  // stats_dtype: T itself for f32 and f64
    std::vector<double> wide(static_cast<size_t>(d.experts));
    std::vector<int32_t> order(static_cast<size_t>(d.experts));
    std::vector<T> probs;
    for (int64_t n = 0; n < d.tokens; ++n) {
      const T* row = in + n * d.experts;
      // A NaN selects as -Inf: the row still chooses k valid experts (its weights are NaN,
      // which the step's overflow check sees).
      for (int64_t e = 0; e < d.experts; ++e) {
        const double x = row[e];
        wide[static_cast<size_t>(e)] = std::isnan(x) ? -INFINITY : x;
      }
      int32_t* row_ids = ids + n * d.choices;
      top_k(wide.data(), d.experts, d.choices, row_ids, order);
      softmax_row<T>(row, d.experts, probs);
      T chosen = 0;
      for (int64_t j = 0; j < d.choices; ++j) chosen += probs[static_cast<size_t>(row_ids[j])];
      for (int64_t j = 0; j < d.choices; ++j) {
        const T p = probs[static_cast<size_t>(row_ids[j])];
        w[n * d.choices + j] = normalize ? p / chosen : p;
      }
    }
  });
}

void moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of, const Tensor& expert_ids,
                  int64_t num_experts) {
  const char* op = "moe_dispatch";
  const MoeDims d =
      check_moe_dispatch(op, counts, source_rows, slot_of, expert_ids, num_experts);
  require_cpu(op, {&counts, &source_rows, &slot_of, &expert_ids});
  const int32_t* ids = expert_ids.data<int32_t>();
  int32_t* count = counts.data<int32_t>();
  std::fill(count, count + d.experts, 0);
  for (int64_t s = 0; s < d.slots(); ++s) {
    if (ids[s] < 0 || ids[s] >= d.experts) {
      throw ShapeError(std::string(op) + ": expert id " + std::to_string(ids[s]) +
                       " at pair " + std::to_string(s) + " is outside [0, " +
                       std::to_string(d.experts) + ")");
    }
    ++count[ids[s]];
  }
  // A counting sort: each expert's first slot, then the pairs in (token, choice) order.
  std::vector<int64_t> next(static_cast<size_t>(d.experts), 0);
  for (int64_t e = 1; e < d.experts; ++e) {
    next[static_cast<size_t>(e)] = next[static_cast<size_t>(e - 1)] + count[e - 1];
  }
  int32_t* rows = source_rows.data<int32_t>();
  int32_t* slots = slot_of.data<int32_t>();
  for (int64_t s = 0; s < d.slots(); ++s) {
    const int64_t slot = next[static_cast<size_t>(ids[s])]++;
    rows[slot] = static_cast<int32_t>(s / d.choices);
    slots[s] = static_cast<int32_t>(slot);
  }
}

void moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of, const Tensor* weights) {
  const char* op = "moe_combine";
  const MoeDims d = check_moe_combine(op, out, rows, slot_of, weights);
  require_cpu(op, {&out, &rows, &slot_of, weights});
  dispatch_floating(rows.dtype(), op, [&]<typename T>() {
    const T* in = rows.data<T>();
    const int32_t* slots = slot_of.data<int32_t>();
    const T* w = weights != nullptr ? weights->data<T>() : nullptr;
    T* o = out.data<T>();
    for (int64_t n = 0; n < d.tokens; ++n) {
      T* out_row = o + n * d.columns;
      std::fill(out_row, out_row + d.columns, T(0));
      for (int64_t j = 0; j < d.choices; ++j) {
        const T* row = in + static_cast<int64_t>(slots[n * d.choices + j]) * d.columns;
        const T scale = w != nullptr ? w[n * d.choices + j] : T(1);
        for (int64_t c = 0; c < d.columns; ++c) out_row[c] += scale * row[c];
      }
    }
  });
}

void moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                          const Tensor& rows, const Tensor& slot_of, const Tensor& weights) {
  const char* op = "moe_combine_backward";
  const MoeDims d = check_moe_combine_backward(op, d_rows, d_weights, dout, rows, slot_of,
                                               weights);
  require_cpu(op, {&d_rows, &d_weights, &dout, &rows, &slot_of, &weights});
  dispatch_floating(rows.dtype(), op, [&]<typename T>() {
    const T* in = rows.data<T>();
    const T* g = dout.data<T>();
    const int32_t* slots = slot_of.data<int32_t>();
    const T* w = weights.data<T>();
    T* d_in = d_rows.data<T>();
    T* d_w = d_weights.data<T>();
    for (int64_t n = 0; n < d.tokens; ++n) {
      const T* g_row = g + n * d.columns;
      for (int64_t j = 0; j < d.choices; ++j) {
        const int64_t slot = slots[n * d.choices + j];
        const T* row = in + slot * d.columns;
        T* d_row = d_in + slot * d.columns;
        const T scale = w[n * d.choices + j];
        T dot = 0;
        for (int64_t c = 0; c < d.columns; ++c) {
          d_row[c] = scale * g_row[c];
          dot += g_row[c] * row[c];
        }
        d_w[n * d.choices + j] = dot;
      }
    }
  });
}

void moe_route_backward(Tensor& dlogits, const Tensor& d_weights, const Tensor& expert_ids,
                        const Tensor& weights, const Tensor& logits, bool normalize) {
  const char* op = "moe_route_backward";
  const MoeDims d =
      check_moe_route_backward(op, dlogits, d_weights, expert_ids, weights, logits);
  require_cpu(op, {&dlogits, &d_weights, &expert_ids, &weights, &logits});
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* in = logits.data<T>();
    const int32_t* ids = expert_ids.data<int32_t>();
    const T* w = weights.data<T>();
    const T* dw = d_weights.data<T>();
    T* out = dlogits.data<T>();
    std::vector<T> probs;
    for (int64_t n = 0; n < d.tokens; ++n) {
      T* out_row = out + n * d.experts;
      const T* w_row = w + n * d.choices;
      const T* dw_row = dw + n * d.choices;
      const int32_t* id_row = ids + n * d.choices;
      T weighted = 0;  // sum_j w_j d_j
      for (int64_t j = 0; j < d.choices; ++j) weighted += w_row[j] * dw_row[j];
      if (normalize) {
        std::fill(out_row, out_row + d.experts, T(0));
        for (int64_t j = 0; j < d.choices; ++j) {
          out_row[id_row[j]] = w_row[j] * (dw_row[j] - weighted);
        }
        continue;
      }
      softmax_row<T>(in + n * d.experts, d.experts, probs);
      // d'_e: the chosen experts' d (a row's k ids are distinct), zero elsewhere.
      std::fill(out_row, out_row + d.experts, T(0));
      for (int64_t j = 0; j < d.choices; ++j) out_row[id_row[j]] = dw_row[j];
      for (int64_t e = 0; e < d.experts; ++e) {
        out_row[e] = probs[static_cast<size_t>(e)] * (out_row[e] - weighted);
      }
    }
  });
}

void moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate) {
  const char* op = "moe_router_prob_sums";
  const MoeDims d = check_moe_router_prob_sums(op, sums, logits);
  require_cpu(op, {&sums, &logits});
  double* out = sums.data<double>();
  if (!accumulate) std::fill(out, out + d.experts, 0.0);
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    std::vector<T> probs;
    for (int64_t n = 0; n < d.tokens; ++n) {
      softmax_row<T>(logits.data<T>() + n * d.experts, d.experts, probs);
      for (int64_t e = 0; e < d.experts; ++e) {
        out[e] += static_cast<double>(probs[static_cast<size_t>(e)]);
      }
    }
  });
}

void moe_router_balance_backward(Tensor& dlogits, const Tensor& logits, const Tensor& prob_grad,
                                 double scale) {
  const char* op = "moe_router_balance_backward";
  const MoeDims d = check_moe_router_balance_backward(op, dlogits, logits, prob_grad);
  require_cpu(op, {&dlogits, &logits, &prob_grad});
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    std::vector<T> probs, g(static_cast<size_t>(d.experts));
    for (int64_t e = 0; e < d.experts; ++e) {
      g[static_cast<size_t>(e)] = static_cast<T>(scale * prob_grad.data<double>()[e]);
    }
    for (int64_t n = 0; n < d.tokens; ++n) {
      softmax_row<T>(logits.data<T>() + n * d.experts, d.experts, probs);
      T mean = 0;  // sum_e p_e g_e
      for (int64_t e = 0; e < d.experts; ++e) {
        mean += probs[static_cast<size_t>(e)] * g[static_cast<size_t>(e)];
      }
      T* row = dlogits.data<T>() + n * d.experts;
      for (int64_t e = 0; e < d.experts; ++e) {
        row[e] += probs[static_cast<size_t>(e)] * (g[static_cast<size_t>(e)] - mean);
      }
    }
  });
}

}  // namespace zero::backend::cpu
