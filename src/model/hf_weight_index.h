// A Hugging Face model folder's weights: where each tensor lives (model.safetensors, or the
// shards of model.safetensors.index.json, all validated when opened), and the checks and layout
// helpers every reader of those weights shares (model/hf_checkpoint.h loads a whole model,
// model/hf_unit_values.h a model built partitioned).
#pragma once
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "io/safetensors_reader.h"
#include "model/parameter.h"

namespace zero::model::hf {
namespace fs = std::filesystem;

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

// The Hugging Face shape of a parameter stored in `layout` (GPT-2's Conv1D weights are stored
// transposed).
Shape hf_shape_of(const Shape& shape, HfLayout layout);
Shape hf_shape(const Parameter& p);
// Out[c, r] = in[r, c] for a contiguous host matrix.
Tensor transposed_host(const Tensor& in);
// Tensors a checkpoint may hold that are not parameters (causal-mask buffers, cached rotary
// frequencies) and are ignored, as transformers ignores them.
bool is_known_buffer(const std::string& name);
// Throws FileError naming the file, the tensor and the first Inf/NaN element of `host` (the
// tensor as stored, or converted to the parameter dtype): weights like that would train to "the
// training loss became nan" with no hint of where it came from. A part read alone gives its
// first element's index in the whole tensor and the whole tensor's element count.
void reject_non_finite(const std::string& file, const std::string& name, const Tensor& host,
                       DType stored_dtype, int64_t first_element = 0, int64_t total_elements = -1);

// Throws FileError naming up to five tensors of the folder `dir` that no parameter used (known
// buffers and, with tied embeddings, a saved lm_head.weight are fine, as in transformers).
void reject_unexpected_tensors(const WeightIndex& index, const std::set<std::string>& used,
                               bool tied_embeddings, const std::string& dir);

}  // namespace zero::model::hf
