#include "model/hf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/finite_check.h"
#include "core/host_convert.h"
#include "io/atomic_file.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace fs = std::filesystem;
namespace {

// Where each tensor name of a model folder lives.
class WeightIndex {
 public:
  explicit WeightIndex(const std::string& dir) {
    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (exists(single)) {
      add_file(single.string());
    } else if (exists(index)) {
      read_index(index.string());
    } else {
      throw FileError(dir + ": no model.safetensors or model.safetensors.index.json found (zero.cpp "
                            "reads safetensors weights; convert pytorch_model.bin with "
                            "transformers' save_pretrained(safe_serialization=True))");
    }
  }

  // The file holding `name`, trying the bare name too (some GPT-2 checkpoints omit the
  // "transformer." prefix and some Llama ones the "model." prefix, as HF's base_model_prefix).
  const std::string* find(const std::string& name, std::string* stored_name) const {
    for (const std::string& candidate : {name, strip_prefix(name)}) {
      auto it = location_.find(candidate);
      if (it != location_.end()) {
        *stored_name = candidate;
        return &it->second;
      }
    }
    return nullptr;
  }
  const io::SafetensorsFile& file(const std::string& path) const { return files_.at(path); }
  const std::map<std::string, std::string>& locations() const { return location_; }

 private:
  static std::string strip_prefix(const std::string& name) {
    for (const char* prefix : {"transformer.", "model."}) {
      const std::string p(prefix);
      if (name.rfind(p, 0) == 0) return name.substr(p.size());
    }
    return name;
  }

  void add_file(const std::string& path) {
    auto [it, inserted] = files_.emplace(path, io::SafetensorsFile::open(path));
    if (!inserted) return;
    for (const auto& entry : it->second.entries()) location_.emplace(entry.name, path);
  }

  void read_index(const std::string& path) {
    const nlohmann::json json =
        io::read_json_file(path, "the sharded checkpoint index", io::kMaxWeightIndexBytes);
    if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object()) {
      throw FileError(path + ": missing the 'weight_map' object of a sharded checkpoint index");
    }
    const fs::path dir = fs::path(path).parent_path();
    for (const auto& [name, file] : json["weight_map"].items()) {
      if (!file.is_string()) {
        throw FileError(path + ": weight_map[\"" + name + "\"] must be a file name, got " +
                        io::json_excerpt(file));
      }
      const std::string shard_name = file.get<std::string>();
      // Shards sit next to the index (as transformers writes them); a path that leaves the
      // folder is a corrupt or hostile index, not a layout to follow.
      if (shard_name.empty() || shard_name.find('/') != std::string::npos ||
          shard_name == "." || shard_name == "..") {
        throw FileError(path + ": weight_map[\"" + name + "\"] is \"" + shard_name +
                        "\"; it must be the name of a shard file in the same folder");
      }
      const std::string shard = (dir / shard_name).string();
      if (!exists(shard)) {
        throw FileError(path + ": shard " + shard + " listed for tensor \"" + name + "\" does not exist");
      }
      add_file(shard);
      if (!files_.at(shard).contains(name)) {
        throw FileError(path + ": tensor \"" + name + "\" is listed in " + shard +
                        " but that file does not contain it");
      }
    }
  }

  // Whether `path` names anything (without throwing for unreadable parents or long names; the
  // open that follows reports those with the path).
  static bool exists(const fs::path& path) {
    std::error_code ignored;
    return fs::exists(path, ignored);
  }

  std::map<std::string, io::SafetensorsFile> files_;
  std::map<std::string, std::string> location_;  // tensor name -> file path
};

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

// Throws FileError naming the file, the tensor and the first Inf/NaN element of `host` (the
// tensor as stored, or converted to the parameter dtype): weights like that would train to "the
// training loss became nan" with no hint of where it came from.
void reject_non_finite(const std::string& file, const std::string& name, const Tensor& host,
                       DType stored_dtype) {
  const std::optional<int64_t> bad = first_non_finite(host.raw_data(), host.dtype(), host.numel());
  if (!bad) return;
  const std::string where = file + ": tensor \"" + name + "\" element " + std::to_string(*bad) +
                            " (of " + std::to_string(host.numel()) + ")";
  if (host.dtype() == stored_dtype) {
    throw FileError(where + " is " + non_finite_kind(host, *bad) +
                    "; the weights are corrupt (or diverged before they were saved): "
                    "re-download or re-convert them");
  }
  throw FileError(where + " is too large for " + dtype_name(host.dtype()) + " (it becomes " +
                  non_finite_kind(host, *bad) + " converted from the file's " +
                  dtype_name(stored_dtype) + "); load the model in a wider dtype");
}

}  // namespace

namespace {
// Tensor-parallel parts (ParamSpec::slice) would be written as whole tensors: refused until the
// writer gathers slices.
void reject_tensor_parallel(const Model& model, const char* what) {
  for (const auto& unit : model.units()) {
    for (const Parameter& p : unit->parameters()) {
      if (p.spec.slice) {
        throw UnsupportedError(std::string(what) + ": " + p.spec.name +
                               " is a tensor-parallel part; Hugging Face folders with tensor "
                               "parallelism are not supported yet");
      }
    }
  }
}
}  // namespace

void load_hf_weights(Model& model, const std::string& dir) {
  WeightIndex index(dir);
  std::set<std::string> used;
  for (Parameter* p : model.parameters()) {
    std::string stored;
    const std::string* path = index.find(p->spec.name, &stored);
    if (path == nullptr) {
      throw FileError(dir + ": tensor \"" + p->spec.name +
                      "\" is missing from the weights; does config.json match model.safetensors?");
    }
    used.insert(stored);
    const io::SafetensorsFile& file = index.file(*path);
    Tensor source = file.tensor(stored);
    // A tensor-parallel part reads the whole tensor and keeps its slice.
    const Shape expected = p->spec.slice ? hf_shape_of(p->spec.slice->full_shape, p->spec.hf_layout)
                                         : hf_shape(*p);
    if (source.shape() != expected) {
      throw ShapeError(*path + ": tensor \"" + stored + "\" has shape " +
                       shape_to_string(source.shape()) + " but the model built from config.json "
                       "expects " + shape_to_string(expected));
    }
    if (!dtype_is_floating(source.dtype())) {
      throw FileError(*path + ": tensor \"" + stored + "\" has integer dtype " +
                      dtype_name(source.dtype()) + "; parameters must be floating point");
    }
    reject_non_finite(*path, stored, source, source.dtype());
    Tensor host = converted_host(source, model.param_dtype());
    // A finite value can still overflow a narrower parameter dtype (1e300 in an f64 file).
    if (host.dtype() != source.dtype()) reject_non_finite(*path, stored, host, source.dtype());
    if (p->spec.hf_layout == HfLayout::kTransposed) host = transposed_host(host);
    if (p->spec.slice) {
      const Tensor whole = converted_host(host, DType::kF64);
      Tensor part = Tensor::zeros_host(p->spec.shape, DType::kF64);
      extract_tensor_slice(*p->spec.slice, whole.data<double>(), part.data<double>());
      host = converted_host(part, model.param_dtype());
    }
    model.backend().copy_from_host(p->value, host.raw_data());
  }
  const bool tied = model.config() && model.config()->tie_word_embeddings;
  std::vector<std::string> unexpected;
  for (const auto& [name, path] : index.locations()) {
    if (used.count(name) || is_known_buffer(name)) continue;
    if (tied && name == "lm_head.weight") continue;  // a tied head saved anyway: HF ignores it
    unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i) list += (i ? ", " : "") + unexpected[i];
    if (unexpected.size() > 5) list += ", ... (" + std::to_string(unexpected.size()) + " in all)";
    throw FileError(dir + ": the weights hold tensors the model does not have: " + list +
                    "; does config.json match model.safetensors?");
  }
}

std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype) {
  return load_hf_model(dir, backend, param_dtype, TensorParallelLayout{});
}

std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype, const TensorParallelLayout& tensor_parallel) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw FileError(dir + ": not a directory (expected a Hugging Face model folder)");
  }
  if (!fs::exists(config_path, ec)) throw FileError(dir + ": no config.json in the model folder");
  TransformerConfig config = TransformerConfig::from_hf_file(config_path);
  auto model = build_transformer(config, backend, param_dtype, tensor_parallel, config_path);
  load_hf_weights(*model, dir);
  return model;
}

void save_hf_model(Model& model, const std::string& dir, DType save_dtype) {
  reject_tensor_parallel(model, "save_hf_model");
  if (!model.config()) throw Error("save_hf_model: the model was not built from a TransformerConfig");
  if (!dtype_is_floating(save_dtype)) {
    throw ConfigError(std::string("cannot save parameters as ") + dtype_name(save_dtype));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw FileError(dir + ": cannot create the model folder (" + ec.message() +
                    "); choose a writable path");
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (Parameter* p : model.parameters()) {
    Tensor host = Tensor::empty(cpu_allocator(), p->spec.shape, model.param_dtype(), MemoryCategory::kOther);
    model.backend().copy_to_host(host.raw_data(), p->value);
    if (p->spec.hf_layout == HfLayout::kTransposed) host = transposed_host(host);
    tensors.emplace_back(p->spec.name, converted_host(host, save_dtype));
  }
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  nlohmann::json config = model.config()->to_hf_json();
  static const std::map<DType, const char*> kTorchNames = {
      {DType::kF32, "float32"}, {DType::kF64, "float64"}, {DType::kF16, "float16"}, {DType::kBF16, "bfloat16"}};
  config["dtype"] = kTorchNames.at(save_dtype);
  const std::string text = config.dump(2) + "\n";
  io::write_file_atomically((fs::path(dir) / "config.json").string(), [&](std::FILE* f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      throw FileError(dir + "/config.json: short write");
    }
  });
}

}  // namespace zero::model
