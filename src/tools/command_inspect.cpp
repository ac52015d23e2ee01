// `zero inspect PATH`: describes a Hugging Face model folder, a zero.cpp checkpoint directory
// (or one of its tags), a safetensors file or a .bin token shard.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/token_shard.h"
#include "io/safetensors_reader.h"
#include "model/transformer_config.h"
#include "tools/command.h"

namespace zero::tools {
namespace {
namespace fs = std::filesystem;

void describe_safetensors(const std::string& path) {
  const auto file = io::SafetensorsFile::open(path);
  uint64_t bytes = 0;
  std::map<std::string, int> dtypes;
  for (const auto& e : file.entries()) {
    bytes += e.data_end - e.data_begin;
    ++dtypes[dtype_name(e.dtype)];
  }
  std::printf("safetensors file %s: %zu tensors, %.2f MiB of data\n", path.c_str(), file.entries().size(),
              static_cast<double>(bytes) / (1 << 20));
  for (const auto& [key, value] : file.metadata()) std::printf("  metadata %s = %s\n", key.c_str(), value.c_str());
  for (const auto& e : file.entries()) {
    std::printf("  %-60s %-5s %s\n", e.name.c_str(), dtype_name(e.dtype), shape_to_string(e.shape).c_str());
  }
}

void describe_shard(const std::string& path) {
  const auto shard = data::TokenShard::open(path, std::numeric_limits<int64_t>::max());
  uint32_t max_token = 0;
  for (int64_t i = 0; i < shard.size(); ++i) max_token = std::max(max_token, shard.token(i));
  std::printf("token shard %s: %lld tokens, largest id %u (needs a vocabulary of at least %u)\n", path.c_str(),
              static_cast<long long>(shard.size()), max_token, max_token + 1);
}

void describe_model_folder(const std::string& dir) {
  const auto config = model::TransformerConfig::from_hf_file((fs::path(dir) / "config.json").string());
  std::printf("Hugging Face model folder %s\n", dir.c_str());
  std::printf("  architecture %s (%s), %lld layers, hidden %lld, %lld heads (%lld kv), head dim %lld\n",
              config.architecture.c_str(), model::family_name(config.family),
              static_cast<long long>(config.num_layers), static_cast<long long>(config.hidden_size),
              static_cast<long long>(config.num_heads), static_cast<long long>(config.num_kv_heads),
              static_cast<long long>(config.head_dim));
  std::printf("  vocabulary %lld, positions %lld, intermediate %lld, tied embeddings %s\n",
              static_cast<long long>(config.vocab_size), static_cast<long long>(config.max_position_embeddings),
              static_cast<long long>(config.intermediate_size), config.tie_word_embeddings ? "yes" : "no");
  std::printf("  %lld parameters\n", static_cast<long long>(config.num_parameters()));
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") {
      const auto file = io::SafetensorsFile::open(entry.path().string());
      std::printf("  %s: %zu tensors\n", entry.path().filename().c_str(), file.entries().size());
    }
  }
}

void describe_checkpoint(const fs::path& folder) {
  std::ifstream in(folder / "engine_state.json");
  const nlohmann::json s = nlohmann::json::parse(in);
  std::printf("zero.cpp checkpoint %s (tag %s)\n", folder.c_str(), s.value("tag", "?").c_str());
  std::printf("  global steps %lld, samples %lld, skipped %lld, world size %d, ZeRO stage %d\n",
              static_cast<long long>(s.value("global_steps", 0)), static_cast<long long>(s.value("global_samples", 0)),
              static_cast<long long>(s.value("skipped_steps", 0)), s.value("world_size", 1), s.value("zero_stage", 0));
  std::printf("  optimizer %s (%lld steps), scheduler at iteration %lld, %zu parameters tensors\n",
              s["optimizer"].value("type", "?").c_str(), static_cast<long long>(s["optimizer"].value("step_count", 0)),
              static_cast<long long>(s["scheduler"].value("last_batch_iteration", -1)), s["parameters"].size());
  if (s.contains("loss_scaler")) {
    const nlohmann::json& scaler = s["loss_scaler"];
    std::printf("  fp16 loss scale %g (hysteresis left %lld, last overflow at scaler iteration %lld)\n",
                scaler.value("scale", 0.0), static_cast<long long>(scaler.value("hysteresis", 0)),
                static_cast<long long>(scaler.value("last_overflow_iteration", -1)));
  }
  if (s.contains("model_config") && s["model_config"].contains("architectures")) {
    std::printf("  model %s\n", s["model_config"]["architectures"][0].get<std::string>().c_str());
  }
}

}  // namespace

int run_inspect(const Args& args) {
  if (args.size() != 1) throw ConfigError("usage: zero inspect PATH");
  const fs::path path = args[0];
  if (!fs::exists(path)) throw FileError(path.string() + ": does not exist");
  if (fs::is_directory(path)) {
    if (fs::exists(path / "config.json")) {
      describe_model_folder(path.string());
    } else if (fs::exists(path / "engine_state.json")) {
      describe_checkpoint(path);
    } else if (fs::exists(path / "latest")) {
      std::ifstream latest(path / "latest");
      std::string tag;
      latest >> tag;
      describe_checkpoint(path / tag);
    } else {
      throw FileError(path.string() + ": neither a model folder (config.json) nor a checkpoint (latest)");
    }
  } else if (path.extension() == ".safetensors") {
    describe_safetensors(path.string());
  } else if (path.extension() == ".bin") {
    describe_shard(path.string());
  } else {
    throw FileError(path.string() + ": unknown kind of file (expected .safetensors or .bin)");
  }
  return 0;
}

}  // namespace zero::tools
