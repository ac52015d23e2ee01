#include "model/unit.h"

#include "core/check.h"

namespace zero::model {

size_t Unit::add_parameter(ParamSpec spec) {
  Parameter p;
  p.spec = std::move(spec);
  parameters_.push_back(std::move(p));
  return parameters_.size() - 1;
}

int64_t Unit::flat_begin() const {
  return parameters_.empty() ? 0 : parameters_.front().flat_offset;
}

int64_t Unit::flat_end() const {
  return parameters_.empty() ? 0 : parameters_.back().flat_offset + parameters_.back().numel();
}

namespace {
Tensor span_view(const std::vector<Parameter>& params, size_t first, size_t last,
                 const Shape& shape, bool gradient) {
  ZERO_CHECK(first <= last && last < params.size(), "bad parameter span");
  int64_t expected = params[first].flat_offset;
  for (size_t i = first; i <= last; ++i) {
    ZERO_CHECK(params[i].flat_offset == expected, "parameters to fuse are not adjacent");
    expected += params[i].numel();
  }
  const Tensor& base = gradient ? params[first].grad : params[first].value;
  ZERO_CHECK(base.defined(), "parameters are not bound to a flat buffer yet");
  ZERO_CHECK(shape_numel(shape) == expected - params[first].flat_offset, "fused shape mismatch");
  return Tensor(base.storage(), base.dtype(), shape, contiguous_strides(shape), base.offset());
}
}  // namespace

Tensor Unit::fused_param(size_t first, size_t last, const Shape& shape) {
  return span_view(parameters_, first, last, shape, false);
}

Tensor Unit::fused_grad(size_t first, size_t last, const Shape& shape) {
  return span_view(parameters_, first, last, shape, true);
}

}  // namespace zero::model
