#include "model/hf_weight_index.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "core/finite_check.h"

namespace zero::model::hf {

Shape hf_shape_of(const Shape& shape, HfLayout layout) {
  if (layout == HfLayout::kTransposed) return {shape[1], shape[0]};
  return shape;
}

Shape hf_shape(const Parameter& p) { return hf_shape_of(p.spec.shape, p.spec.hf_layout); }

// Out[c, r] = in[r, c] for a contiguous host matrix.
Tensor transposed_host(const Tensor& in) {
  const int64_t rows = in.size(0);
  const int64_t cols = in.size(1);
  Tensor out = Tensor::empty(cpu_allocator(), {cols, rows}, in.dtype(), MemoryCategory::kOther);
  const size_t elem = in.element_size();
  const auto* src = static_cast<const char*>(in.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(dst + static_cast<size_t>(c * rows + r) * elem,
                  src + static_cast<size_t>(r * cols + c) * elem, elem);
    }
  }
  return out;
}

// Tensors a checkpoint may hold that are not parameters (causal-mask buffers, cached rotary
// frequencies) and are ignored, as transformers ignores them.
bool is_known_buffer(const std::string& name) {
  for (const char* suffix : {".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq"}) {
    const std::string s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      return true;
    }
  }
  return false;
}

namespace {

// "inf", "-inf" or "nan": the non-finite element `index` of a host tensor.
std::string non_finite_kind(const Tensor& host, int64_t index) {
  const char* at = static_cast<const char*>(host.raw_data()) +
                   static_cast<size_t>(index) * host.element_size();
  double value = 0;
  switch (host.dtype()) {
    case DType::kF64: std::memcpy(&value, at, sizeof(double)); break;
    case DType::kF32: {
      float f = 0;
      std::memcpy(&f, at, sizeof(float));
      value = f;
      break;
    }
    default: {
      // 16-bit floats: all exponent bits set; a zero mantissa is an infinity.
      uint16_t bits = 0;
      std::memcpy(&bits, at, sizeof(bits));
      const uint16_t mantissa = host.dtype() == DType::kBF16 ? 0x007F : 0x03FF;
      if ((bits & mantissa) != 0) return "nan";
      return (bits & 0x8000) != 0 ? "-inf" : "inf";
    }
  }
  if (std::isnan(value)) return "nan";
  return value < 0 ? "-inf" : "inf";
}

}  // namespace

// Throws FileError naming the file, the tensor and the first Inf/NaN element of `host` (the
// tensor as stored, or converted to the parameter dtype): weights like that would train to "the
// training loss became nan" with no hint of where it came from.
void reject_non_finite(const std::string& file, const std::string& name, const Tensor& host,
                       DType stored_dtype, int64_t first_element, int64_t total_elements) {
  const std::optional<int64_t> bad = first_non_finite(host.raw_data(), host.dtype(), host.numel());
  if (!bad) return;
  const std::string where = file + ": tensor \"" + name + "\" element " + std::to_string(first_element + *bad) +
                            " (of " + std::to_string(total_elements < 0 ? host.numel() : total_elements) + ")";
  if (host.dtype() == stored_dtype) {
    throw FileError(where + " is " + non_finite_kind(host, *bad) +
                    "; the weights are corrupt (or diverged before they were saved): "
                    "re-download or re-convert them");
  }
  throw FileError(where + " is too large for " + dtype_name(host.dtype()) + " (it becomes " +
                  non_finite_kind(host, *bad) + " converted from the file's " +
                  dtype_name(stored_dtype) + "); load the model in a wider dtype");
}

void reject_unexpected_tensors(const WeightIndex& index, const std::set<std::string>& used,
                               bool tied_embeddings, const std::string& dir) {
  std::vector<std::string> unexpected;
  for (const auto& [name, path] : index.locations()) {
    if (used.count(name) || is_known_buffer(name)) continue;
    if (tied_embeddings && name == "lm_head.weight") continue;  // a tied head saved anyway
    unexpected.push_back(name);
  }
  if (unexpected.empty()) return;
  std::string list;
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) list += (i ? ", " : "") + unexpected[i];
  if (unexpected.size() > 5) list += ", ... (" + std::to_string(unexpected.size()) + " in all)";
  throw FileError(dir + ": the weights hold tensors the model does not have: " + list +
                  "; does config.json match model.safetensors?");
}

}  // namespace zero::model::hf
