#include "model/hf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "comm/comm.h"
#include "core/error.h"
#include "core/finite_check.h"
#include "core/host_convert.h"
#include "io/atomic_file.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/hf_weight_index.h"
#include "model/tensor_slice_gather.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace fs = std::filesystem;
using hf::hf_shape;
using hf::hf_shape_of;
using hf::reject_non_finite;
using hf::transposed_host;
using hf::WeightIndex;

namespace {
// Tensor-parallel parts (ParamSpec::slice) are gathered over the model's tensor group into whole
// tensors: refused when the model has no group to gather over, or one of another size.
void require_gatherable(const Model& model, const char* what) {
  const comm::Comm* group = model.tensor_group();
  const int64_t ranks = group != nullptr ? group->world_size() : 1;
  for (const auto& unit : model.units()) {
    for (const Parameter& p : unit->parameters()) {
      if (p.spec.slice && p.spec.slice->parts * p.spec.slice->replicas != ranks) {
        throw UnsupportedError(std::string(what) + ": " + p.spec.name + " is part " +
                               std::to_string(p.spec.slice->index) + " of " +
                               std::to_string(p.spec.slice->parts) +
                               " of a tensor-parallel model, but the model's tensor group has " +
                               std::to_string(ranks) +
                               " rank(s); call it on every rank of the tensor group, after "
                               "Model::set_tensor_group");
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
  hf::reject_unexpected_tensors(index, used, model.config() && model.config()->tie_word_embeddings,
                                dir);
}

std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype) {
  return load_hf_model(dir, backend, param_dtype, TensorParallelLayout{});
}

namespace {
// DIR/config.json of a Hugging Face folder (FileError naming what is missing).
std::string folder_config_path(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw FileError(dir + ": not a directory (expected a Hugging Face model folder)");
  }
  if (!fs::exists(config_path, ec)) throw FileError(dir + ": no config.json in the model folder");
  return config_path;
}
}  // namespace

std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype, const TensorParallelLayout& tensor_parallel) {
  const std::string config_path = folder_config_path(dir);
  TransformerConfig config = TransformerConfig::from_hf_file(config_path);
  auto model = build_transformer(config, backend, param_dtype, tensor_parallel, config_path);
  load_hf_weights(*model, dir);
  return model;
}

std::unique_ptr<Model> load_hf_model_for_inference(const std::string& dir,
                                                   backend::Backend& backend, DType param_dtype) {
  const std::string config_path = folder_config_path(dir);
  TransformerConfig config = TransformerConfig::from_hf_file(config_path);
  auto model = build_transformer_for_inference(config, backend, param_dtype, config_path);
  load_hf_weights(*model, dir);
  return model;
}

void save_hf_model(Model& model, const std::string& dir, DType save_dtype) {
  require_gatherable(model, "save_hf_model");
  if (!model.config()) throw Error("save_hf_model: the model was not built from a TransformerConfig");
  if (!dtype_is_floating(save_dtype)) {
    throw ConfigError(std::string("cannot save parameters as ") + dtype_name(save_dtype));
  }
  // Tensor parallelism: every rank of the group gathers the parts (bit for bit,
  // model/tensor_slice_gather.h); its rank 0 writes the folder.
  comm::Comm* group = model.tensor_group();
  if (group != nullptr && group->rank() != 0) {
    for (Parameter* p : model.parameters()) {
      if (!p->spec.slice) continue;
      Tensor host = Tensor::empty(cpu_allocator(), p->spec.shape, model.param_dtype(), MemoryCategory::kOther);
      model.backend().copy_to_host(host.raw_data(), p->value);
      gather_logical_tensor(model.backend(), group, p->spec, host);
    }
    return;
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (Parameter* p : model.parameters()) {
    Tensor host = Tensor::empty(cpu_allocator(), p->spec.shape, model.param_dtype(), MemoryCategory::kOther);
    model.backend().copy_to_host(host.raw_data(), p->value);
    host = gather_logical_tensor(model.backend(), group, p->spec, host);
    if (p->spec.hf_layout == HfLayout::kTransposed) host = transposed_host(host);
    tensors.emplace_back(p->spec.name, converted_host(host, save_dtype));
  }
  // After the gathers: a folder that cannot be created must not leave the group waiting.
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw FileError(dir + ": cannot create the model folder (" + ec.message() +
                    "); choose a writable path");
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
