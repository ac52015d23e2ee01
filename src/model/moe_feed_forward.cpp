#include "model/moe_feed_forward.h"

#include "core/check.h"

namespace zero::model {

MoeFeedForward::MoeFeedForward(int64_t num_experts, int64_t experts_per_token,
                               int64_t intermediate_size, bool normalize_weights)
    : experts_(num_experts),
      choices_(experts_per_token),
      inner_(intermediate_size),
      normalize_(normalize_weights) {
  ZERO_CHECK(experts_ >= 1 && choices_ >= 1 && choices_ <= experts_,
             "a mixture of " << experts_ << " experts with " << choices_ << " per token");
}

template <typename Fn>
void MoeFeedForward::for_each_expert(Fn&& fn) const {
  int64_t first = 0;
  for (int64_t e = 0; e < experts_; ++e) {
    const int64_t count = counts_[static_cast<size_t>(e)];
    if (count > 0) fn(e, first, count);
    first += count;
  }
}

void MoeFeedForward::forward(backend::Backend& be, const Tensor& h, const Tensor& router,
                             const Tensor& up, const Tensor& down, Tensor* y, bool save,
                             RouterBalance* balance) {
  const int64_t rows = h.size(0), c = h.size(1), slots = rows * choices_;
  const DType dt = h.dtype();
  const auto act = MemoryCategory::kActivations;
  Tensor logits = be.empty({rows, experts_}, dt, act);
  be.linear_forward(logits, h, router, nullptr);
  Tensor expert_ids = be.empty({rows, choices_}, DType::kI32, act);
  Tensor weights = be.empty({rows, choices_}, backend::stats_dtype(dt), act);
  be.moe_route(expert_ids, weights, logits, normalize_);
  Tensor counts = be.empty({experts_}, DType::kI32, act);
  Tensor source_rows = be.empty({slots}, DType::kI32, act);
  Tensor slot_of = be.empty({rows, choices_}, DType::kI32, act);
  be.moe_dispatch(counts, source_rows, slot_of, expert_ids, experts_);
  counts_.assign(static_cast<size_t>(experts_), 0);
  be.copy_to_host(counts_.data(), counts);  // the group sizes shape the products below
  int64_t routed = 0;
  for (const int32_t n : counts_) routed += n;
  ZERO_CHECK(routed == slots, "moe_dispatch counted " << routed << " of " << slots << " pairs");
  if (balance != nullptr) balance->add(counts_, logits);

  Tensor gathered = be.empty({slots, c}, dt, act);
  be.embedding_forward(gathered, source_rows, h, false);
  Tensor up_out = be.empty({slots, 2 * inner_}, dt, act);
  Tensor activated = be.empty({slots, inner_}, dt, act);
  Tensor expert_out = be.empty({slots, c}, dt, act);
  for_each_expert([&](int64_t e, int64_t first, int64_t count) {
    Tensor up_e = up_out.narrow(0, first, count);
    Tensor act_e = activated.narrow(0, first, count);
    Tensor out_e = expert_out.narrow(0, first, count);
    be.linear_forward(up_e, gathered.narrow(0, first, count),
                      up.narrow(0, e * 2 * inner_, 2 * inner_), nullptr);
    be.swiglu_forward(act_e, up_e);
    be.linear_forward(out_e, act_e, down.narrow(0, e * c, c), nullptr);
  });
  gathered = Tensor();
  if (y != nullptr) be.moe_combine(*y, expert_out, slot_of, &weights);
  if (save) {
    h_ = h;
    logits_ = logits;
    expert_ids_ = expert_ids;
    weights_ = weights;
    source_rows_ = source_rows;
    slot_of_ = slot_of;
    up_ = up_out;
    act_ = activated;
    expert_out_ = expert_out;
  }
}

Tensor MoeFeedForward::backward(backend::Backend& be, const Tensor& dy, const Tensor& router,
                                const Tensor& up, const Tensor& down, Tensor& d_router,
                                Tensor& d_up, Tensor& d_down, const RouterBalance* balance,
                                double loss_grad) {
  ZERO_CHECK(expert_out_.defined(), "mixture-of-experts backward without a saved forward");
  const int64_t rows = dy.size(0), c = dy.size(1), slots = rows * choices_;
  const DType dt = dy.dtype();
  const auto act = MemoryCategory::kActivations;
  // y = combine(expert_out, weights): gradients of the experts' outputs and of the weights.
  Tensor d_out = be.empty({slots, c}, dt, act);
  Tensor d_weights = be.empty({rows, choices_}, backend::stats_dtype(dt), act);
  be.moe_combine_backward(d_out, d_weights, dy, expert_out_, slot_of_, weights_);
  expert_out_ = Tensor();

  Tensor gathered = be.empty({slots, c}, dt, act);
  be.embedding_forward(gathered, source_rows_, h_, false);
  Tensor d_gathered = be.empty({slots, c}, dt, act);
  Tensor d_act = be.empty({slots, inner_}, dt, act);
  Tensor d_up_out = be.empty({slots, 2 * inner_}, dt, act);
  for_each_expert([&](int64_t e, int64_t first, int64_t count) {
    Tensor d_act_e = d_act.narrow(0, first, count);
    Tensor d_up_e = d_up_out.narrow(0, first, count);
    Tensor d_gathered_e = d_gathered.narrow(0, first, count);
    Tensor d_down_e = d_down.narrow(0, e * c, c);
    Tensor d_up_w = d_up.narrow(0, e * 2 * inner_, 2 * inner_);
    be.linear_backward(&d_act_e, d_down_e, nullptr, d_out.narrow(0, first, count),
                       act_.narrow(0, first, count), down.narrow(0, e * c, c));
    be.swiglu_backward(d_up_e, d_act_e, up_.narrow(0, first, count));
    be.linear_backward(&d_gathered_e, d_up_w, nullptr, d_up_e, gathered.narrow(0, first, count),
                       up.narrow(0, e * 2 * inner_, 2 * inner_));
  });
  d_out = d_act = d_up_out = gathered = Tensor();
  up_ = act_ = Tensor();
  // Each token's k slots sum back into its row (the gather's backward).
  Tensor dh = be.empty({rows, c}, dt, act);
  be.moe_combine(dh, d_gathered, slot_of_, nullptr);
  d_gathered = Tensor();
  // The router: weights = route(h @ router^T).
  Tensor d_logits = be.empty({rows, experts_}, dt, act);
  be.moe_route_backward(d_logits, d_weights, expert_ids_, weights_, logits_, normalize_);
  if (balance != nullptr) {
    be.moe_router_balance_backward(d_logits, logits_, balance->prob_grad(), loss_grad);
  }
  Tensor dh_router = be.empty({rows, c}, dt, act);
  be.linear_backward(&dh_router, d_router, nullptr, d_logits, h_, router);
  be.add(dh, dh_router, 1.0);
  release();
  return dh;
}

void MoeFeedForward::release() {
  h_ = logits_ = expert_ids_ = weights_ = source_rows_ = slot_of_ = Tensor();
  up_ = act_ = expert_out_ = Tensor();
}

}  // namespace zero::model
