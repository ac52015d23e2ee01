#include "generation/generation_config.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"

namespace zero::generation {
namespace {

namespace fs = std::filesystem;

// generation_config.json files are a few hundred bytes; anything near this is not one.
constexpr uint64_t kMaxGenerationConfigBytes = 1 << 20;
// No vocabulary holds more ids, and no eos list is longer than a handful.
constexpr int64_t kMaxTokenId = (int64_t{1} << 31) - 1;
constexpr size_t kMaxEosIds = 1024;

[[noreturn]] void bad(const std::string& source, const std::string& key, const nlohmann::json& v,
                      const std::string& expected) {
  throw ConfigError(source + ": \"" + key + "\" is " + io::json_excerpt(v) + "; it must be " +
                    expected);
}

const nlohmann::json* present(const nlohmann::json& root, const char* key) {
  const auto it = root.find(key);
  return it == root.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const nlohmann::json& root, const char* key,
                             const std::string& source, bool positive) {
  const nlohmann::json* v = present(root, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    bad(source, key, *v, "a finite number");
  }
  const double value = v->get<double>();
  if (positive && !(value > 0.0)) bad(source, key, *v, "a number above 0");
  return value;
}

std::optional<int64_t> count(const nlohmann::json& root, const char* key,
                             const std::string& source, int64_t min, int64_t max) {
  const nlohmann::json* v = present(root, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) bad(source, key, *v, "a whole number");
  // nlohmann stores non-negative integers as unsigned: compare those as unsigned first.
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max);
  if (too_big || v->get<int64_t>() < min || v->get<int64_t>() > max) {
    bad(source, key, *v, "from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return v->get<int64_t>();
}

// An id or a list of ids (HF accepts both for eos_token_id).
std::vector<int64_t> token_ids(const nlohmann::json& root, const char* key,
                               const std::string& source) {
  const nlohmann::json* v = present(root, key);
  if (v == nullptr) return {};
  const std::string expected = "a token id or a list of them, each from 0 to " +
                               std::to_string(kMaxTokenId);
  std::vector<int64_t> ids;
  auto one = [&](const nlohmann::json& id) {
    const bool ok = id.is_number_integer() &&
                    (id.is_number_unsigned() ? id.get<uint64_t>() <= uint64_t{kMaxTokenId}
                                             : id.get<int64_t>() >= 0 &&
                                                   id.get<int64_t>() <= kMaxTokenId);
    if (!ok) bad(source, key, *v, expected);
    ids.push_back(id.get<int64_t>());
  };
  if (v->is_array()) {
    if (v->size() > kMaxEosIds) bad(source, key, *v, "a list of at most 1024 ids");
    for (const auto& id : *v) one(id);
  } else {
    one(*v);
  }
  return ids;
}

}  // namespace

GenerationDefaults parse_generation_config(std::string_view text, const std::string& source) {
  const nlohmann::json root = io::parse_json_bounded(text, source, "the generation config");
  if (!root.is_object()) {
    throw ConfigError(source + " must hold one JSON object, got " + io::json_excerpt(root));
  }
  GenerationDefaults d;
  if (const nlohmann::json* v = present(root, "do_sample")) {
    if (!v->is_boolean()) bad(source, "do_sample", *v, "true or false");
    d.do_sample = v->get<bool>();
  }
  d.temperature = number(root, "temperature", source, true);
  d.top_k = count(root, "top_k", source, 0, std::numeric_limits<int32_t>::max());
  d.top_p = number(root, "top_p", source, true);
  if (d.top_p && *d.top_p > 1.0) bad(source, "top_p", root["top_p"], "in (0, 1]");
  d.repetition_penalty = number(root, "repetition_penalty", source, true);
  d.max_new_tokens = count(root, "max_new_tokens", source, 1, kMaxTokenId);
  d.eos_token_ids = token_ids(root, "eos_token_id", source);
  // What HF's generate() would do differently: beams, n-gram bans, length penalties, ... and
  // max_length (prompt + new tokens; zero.cpp counts new tokens only: max_new_tokens).
  const std::pair<const char*, nlohmann::json> hf_defaults[] = {
      {"max_length", 20},         {"num_beams", 1},           {"num_beam_groups", 1},
      {"penalty_alpha", nullptr},
      {"no_repeat_ngram_size", 0}, {"length_penalty", 1.0},   {"min_new_tokens", nullptr},
      {"min_length", 0},          {"typical_p", 1.0},          {"epsilon_cutoff", 0.0},
      {"eta_cutoff", 0.0},        {"min_p", nullptr},          {"bad_words_ids", nullptr},
      {"force_words_ids", nullptr}, {"suppress_tokens", nullptr},
      {"begin_suppress_tokens", nullptr}, {"forced_bos_token_id", nullptr},
      {"forced_eos_token_id", nullptr}, {"diversity_penalty", 0.0},
      {"encoder_repetition_penalty", 1.0}, {"exponential_decay_length_penalty", nullptr},
      {"sequence_bias", nullptr}, {"guidance_scale", nullptr}};
  for (const auto& [key, hf_default] : hf_defaults) {
    const auto it = root.find(key);
    if (it == root.end() || *it == hf_default) continue;
    if (it->is_number() && hf_default.is_number() && it->get<double>() == hf_default.get<double>()) {
      continue;
    }
    d.not_applied.push_back(std::string(key) + " = " + io::json_excerpt(*it));
  }
  return d;
}

std::vector<int64_t> eos_token_ids_of(const nlohmann::json& model_config,
                                      const std::string& source) {
  return model_config.is_object() ? token_ids(model_config, "eos_token_id", source)
                                  : std::vector<int64_t>{};
}

GenerationDefaults read_generation_defaults(const std::string& model_dir) {
  GenerationDefaults d;
  std::error_code ec;
  const fs::path generation = fs::path(model_dir) / "generation_config.json";
  if (fs::exists(generation, ec)) {
    const std::string source = generation.string();
    d = parse_generation_config(
        io::read_text_file(source, "the generation config", kMaxGenerationConfigBytes), source);
  }
  if (d.eos_token_ids.empty()) {
    const fs::path config = fs::path(model_dir) / "config.json";
    if (fs::exists(config, ec)) {
      const std::string source = config.string();
      const nlohmann::json root =
          io::read_json_file(source, "the model config", kMaxGenerationConfigBytes * 16);
      d.eos_token_ids = eos_token_ids_of(root, source);
    }
  }
  return d;
}

}  // namespace zero::generation
