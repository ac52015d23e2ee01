// `zero inspect PATH`: describes a Hugging Face model folder, a zero.cpp checkpoint directory
// (or one of its tags), a safetensors file or a .bin token shard.
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "core/error.h"
#include "data/token_shard.h"
#include "engine/checkpoint_dir.h"
#include "engine/engine_state.h"
#include "io/safetensors_reader.h"
#include "model/transformer_config.h"
#include "tools/arg_parser.h"
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
  if (shard.has_mask()) {
    const double percent = shard.size() > 0 ? 100.0 * static_cast<double>(shard.target_count()) /
                                                  static_cast<double>(shard.size())
                                            : 0.0;
    std::printf("  loss mask: %lld of %lld tokens are targets (%.1f%%), %lld masked (e.g. prompts)\n",
                static_cast<long long>(shard.target_count()), static_cast<long long>(shard.size()), percent,
                static_cast<long long>(shard.size() - shard.target_count()));
  } else {
    std::printf("  no loss mask: every token is a target\n");
  }
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
  if (config.sliding_window > 0) {
    int64_t windowed = 0;
    for (int64_t l = 0; l < config.num_layers; ++l) windowed += config.window_of_layer(l) > 0;
    std::printf("  sliding window of %lld positions in %lld of %lld layers\n",
                static_cast<long long>(config.sliding_window), static_cast<long long>(windowed),
                static_cast<long long>(config.num_layers));
  }
  if (config.qk_norm) {
    std::printf("  query and key heads RMS-normalised before rotary (q_norm, k_norm)\n");
  }
  if (config.is_moe()) {
    std::printf("  %lld experts of width %lld, %lld per token\n",
                static_cast<long long>(config.num_experts),
                static_cast<long long>(config.intermediate_size),
                static_cast<long long>(config.experts_per_token));
  }
  std::printf("  %lld parameters\n", static_cast<long long>(config.num_parameters()));
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".safetensors") {
      const auto file = io::SafetensorsFile::open(it->path().string());
      std::printf("  %s: %zu tensors\n", it->path().filename().c_str(), file.entries().size());
    }
  }
  if (error) throw FileError(dir + ": cannot list the folder (" + error.message() + ")");
}

// Through the same reader as resume and convert: what inspect shows is what they would load.
void describe_checkpoint(const std::string& tag_dir) {
  const engine::EngineState s = engine::read_engine_state(tag_dir);
  std::printf("zero.cpp checkpoint %s (tag %s)\n", tag_dir.c_str(), s.tag.c_str());
  std::printf("  global steps %lld, samples %lld, skipped %lld, world size %d, ZeRO stage %d\n",
              static_cast<long long>(s.global_steps), static_cast<long long>(s.global_samples),
              static_cast<long long>(s.skipped_steps), s.world_size, s.zero_stage);
  std::printf("  optimizer %s (%lld steps), scheduler at iteration %lld, %zu parameters tensors\n",
              s.optimizer_type.c_str(), static_cast<long long>(s.optimizer_step_count),
              static_cast<long long>(s.scheduler_last_batch_iteration), s.parameters.size());
  if (s.loss_scaler) {
    std::printf("  fp16 loss scale %g (hysteresis left %lld, last overflow at scaler iteration %lld)\n",
                s.loss_scaler->scale, static_cast<long long>(s.loss_scaler->hysteresis),
                static_cast<long long>(s.loss_scaler->last_overflow_iteration));
  }
  if (s.model_config) std::printf("  model %s\n", s.model_config->architecture.c_str());
}

bool path_exists(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

constexpr const char* kUsage =
    "usage: zero inspect PATH\n"
    "  PATH is one of:\n"
    "    a Hugging Face model folder (with config.json)\n"
    "    a checkpoint directory (with latest: shows the checkpoint it names) or one checkpoint\n"
    "      folder DIR/<tag> (with engine_state.json)\n"
    "    a .safetensors file, or a .bin token shard\n"
    "  -h, --help\n      print this text\n";

}  // namespace

int run_inspect(const Args& args) {
  for (const std::string& arg : args) {
    if (ArgParser::is_help(arg)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (args.size() == 1 && args[0].rfind("--", 0) == 0) {
    throw ConfigError("zero inspect: unknown flag " + ArgParser::shown(args[0]) +
                      " (inspect takes only a PATH)\n" + kUsage);
  }
  if (args.size() != 1) throw ConfigError(std::string("zero inspect takes one PATH\n") + kUsage);
  const fs::path path = args[0];
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    throw FileError(ArgParser::shown(path.string()) + ": cannot inspect (" + error.message() + ")");
  }
  if (!fs::exists(status)) throw FileError(ArgParser::shown(path.string()) + ": does not exist");
  if (fs::is_directory(status)) {
    if (path_exists(path / "config.json")) {
      describe_model_folder(path.string());
    } else if (path_exists(path / "engine_state.json")) {
      describe_checkpoint(path.string());
    } else if (path_exists(path / "latest")) {
      // The same `latest` checks as resume and convert: a tag inside this directory only.
      const std::string tag = engine::resolve_checkpoint_tag(path.string(), "");
      describe_checkpoint((path / tag).string());
    } else {
      throw FileError(path.string() + ": neither a model folder (config.json) nor a checkpoint "
                                      "(latest or engine_state.json)");
    }
  } else if (path.extension() == ".safetensors") {
    describe_safetensors(path.string());
  } else if (path.extension() == ".bin") {
    describe_shard(path.string());
  } else {
    throw FileError(ArgParser::shown(path.string()) +
                    ": unknown kind of file (expected .safetensors or .bin)");
  }
  return 0;
}

}  // namespace zero::tools
