#include "model/hf_unit_values.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "model/hf_weight_index.h"
#include "model/partitioned_init.h"

namespace zero::model {
namespace fs = std::filesystem;
namespace {

class HfUnitValues final : public UnitValueSource {
 public:
  explicit HfUnitValues(std::string dir) : dir_(std::move(dir)), index_(dir_) {}

  void unit_values(const Model& model, size_t u, int64_t begin, int64_t count, Tensor& out) override {
    if (!checked_) check_names_and_shapes(model);
    ZERO_CHECK(out.numel() == count && out.dtype() == model.param_dtype(),
               "unit values into " << out.describe());
    const Unit& unit = *model.units()[u];
    const size_t element = dtype_size(out.dtype());
    char* target = static_cast<char*>(out.raw_data());
    std::memset(target, 0, static_cast<size_t>(count) * element);
    for (const Parameter& p : unit.parameters()) {
      // The part of this parameter inside [begin, begin + count) of the unit.
      const int64_t at = p.flat_offset - unit.flat_begin();
      const int64_t first = std::max(begin, at);
      const int64_t last = std::min(begin + count, at + p.numel());
      if (first >= last) continue;
      const Tensor part = read_part(p, first - at, last - first, model.param_dtype());
      std::memcpy(target + static_cast<size_t>(first - begin) * element, part.raw_data(),
                  static_cast<size_t>(last - first) * element);
    }
  }

 private:
  // Elements [first, first + n) of `p` (row-major in zero.cpp's layout) in `dtype`.
  Tensor read_part(const Parameter& p, int64_t first, int64_t n, DType dtype) {
    std::string stored;
    const std::string* path = index_.find(p.spec.name, &stored);
    ZERO_CHECK(path != nullptr, "tensor " << p.spec.name << " vanished after the check");
    const io::SafetensorsFile& file = index_.file(*path);
    const DType file_dtype = file.entry(stored).dtype;
    if (p.spec.hf_layout == HfLayout::kTransposed) {
      // Strided in the file: read whole, converted and transposed, then cut.
      Tensor whole = file.tensor(stored);
      hf::reject_non_finite(*path, stored, whole, file_dtype);
      Tensor host = converted_host(whole, dtype);
      if (host.dtype() != file_dtype) hf::reject_non_finite(*path, stored, host, file_dtype);
      host = hf::transposed_host(host);
      Tensor part = Tensor::empty(cpu_allocator(), {n}, dtype, MemoryCategory::kOther);
      std::memcpy(part.raw_data(),
                  static_cast<const char*>(host.raw_data()) + first * static_cast<int64_t>(dtype_size(dtype)),
                  static_cast<size_t>(n) * dtype_size(dtype));
      return part;
    }
    const Tensor raw = file.elements(stored, first, n);
    hf::reject_non_finite(*path, stored, raw, file_dtype, first, p.numel());
    Tensor host = converted_host(raw, dtype);
    // A finite value can still overflow a narrower parameter dtype (1e300 in an f64 file).
    if (host.dtype() != file_dtype) hf::reject_non_finite(*path, stored, host, file_dtype, first, p.numel());
    return host;
  }

  // Everything load_hf_weights checks that the headers tell, before any data is read.
  void check_names_and_shapes(const Model& model) {
    std::set<std::string> used;
    for (const auto& unit : model.units()) {
      for (const Parameter& p : unit->parameters()) {
        if (p.spec.slice) {
          throw UnsupportedError("zero.Init of a tensor-parallel model is not built: " + p.spec.name +
                                 " is a tensor-parallel part; tensor parallelism runs with ZeRO "
                                 "stages 0-2, which load the model whole");
        }
        std::string stored;
        const std::string* path = index_.find(p.spec.name, &stored);
        if (path == nullptr) {
          throw FileError(dir_ + ": tensor \"" + p.spec.name +
                          "\" is missing from the weights; does config.json match model.safetensors?");
        }
        used.insert(stored);
        const io::SafetensorsEntry& entry = index_.file(*path).entry(stored);
        const Shape expected = hf::hf_shape(p);
        if (entry.shape != expected) {
          throw ShapeError(*path + ": tensor \"" + stored + "\" has shape " + shape_to_string(entry.shape) +
                           " but the model built from config.json expects " + shape_to_string(expected));
        }
        if (!dtype_is_floating(entry.dtype)) {
          throw FileError(*path + ": tensor \"" + stored + "\" has integer dtype " + dtype_name(entry.dtype) +
                          "; parameters must be floating point");
        }
      }
    }
    hf::reject_unexpected_tensors(index_, used, model.config() && model.config()->tie_word_embeddings,
                                  dir_);
    checked_ = true;
  }

  std::string dir_;
  hf::WeightIndex index_;
  bool checked_ = false;
};

}  // namespace

std::unique_ptr<UnitValueSource> hf_unit_values(const std::string& dir) {
  return std::make_unique<HfUnitValues>(dir);
}

std::unique_ptr<Model> load_hf_model_partitioned(const std::string& dir, backend::Backend& backend,
                                                 DType param_dtype) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw FileError(dir + ": not a directory (expected a Hugging Face model folder)");
  }
  if (!fs::exists(config_path, ec)) throw FileError(dir + ": no config.json in the model folder");
  const TransformerConfig config = TransformerConfig::from_hf_file(config_path);
  auto values = hf_unit_values(dir);
  return build_transformer_partitioned(config, backend, param_dtype, std::move(values), config_path);
}

}  // namespace zero::model
