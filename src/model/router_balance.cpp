#include "model/router_balance.h"

#include "core/check.h"

namespace zero::model {

RouterBalance::RouterBalance(backend::Backend& backend, int64_t experts, double coefficient)
    : backend_(backend),
      experts_(experts),
      coefficient_(coefficient),
      counts_(static_cast<size_t>(experts), 0) {
  prob_sums_ = backend_.zeros({experts}, DType::kF64, MemoryCategory::kActivations);
}

void RouterBalance::add(const std::vector<int32_t>& counts, const Tensor& logits) {
  if (closed_) return;
  ZERO_CHECK(static_cast<int64_t>(counts.size()) == experts_ && logits.dim() == 2 &&
                 logits.size(1) == experts_,
             "router balance over " << experts_ << " experts given " << counts.size()
                                    << " counts and logits " << logits.describe());
  for (size_t e = 0; e < counts_.size(); ++e) counts_[e] += counts[e];
  rows_ += logits.size(0);
  backend_.moe_router_prob_sums(prob_sums_, logits, true);
}

double RouterBalance::finish() {
  ZERO_CHECK(!closed_, "router balance finished twice");
  closed_ = true;
  std::vector<double> sums(static_cast<size_t>(experts_));
  backend_.copy_to_host(sums.data(), prob_sums_);
  prob_sums_ = Tensor();
  std::vector<double> grad(static_cast<size_t>(experts_), 0.0);
  value_ = 0.0;
  if (rows_ > 0) {
    const auto r = static_cast<double>(rows_);
    const auto e_count = static_cast<double>(experts_);
    for (size_t e = 0; e < grad.size(); ++e) {
      const double f = static_cast<double>(counts_[e]) / r;
      value_ += f * (sums[e] / r);
      grad[e] = coefficient_ * e_count * f / r;
    }
    value_ *= coefficient_ * e_count;
  }
  prob_grad_ = backend_.empty({experts_}, DType::kF64, MemoryCategory::kActivations);
  backend_.copy_from_host(prob_grad_, grad.data());
  return value_;
}

const Tensor& RouterBalance::prob_grad() const {
  ZERO_CHECK(closed_ && prob_grad_.defined(), "router balance gradient before finish()");
  return prob_grad_;
}

}  // namespace zero::model
