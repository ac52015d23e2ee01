// Regressions for config.json reading ("Hardening" issue): sizes near the int64 edge overflowed
// signed products (shape_numel, q_dim, read_gpt2's 4 * n_embd: undefined behaviour, and a
// release build ended in "internal check failed ... view of 64 elements at -48"); n_layer = 2^40
// spun building units instead of refusing; a deeply nested unused key overflowed the stack;
// "architectures": [] and other wrong shapes; a model far larger than memory was allocated.
// Every one is now a ConfigError/FileError naming the file and key, within well under a second.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/fifo_watchdog.h"
#include "io/io_scratch.h"
#include "model/config_limits.h"
#include "model/transformer_builder.h"
#include "model/transformer_config.h"

namespace zero::model {
namespace config_json_hardening_test {

using io::testing::has;

nlohmann::json gpt2_json() {
  return nlohmann::json::parse(R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64})");
}

nlohmann::json llama_json() {
  return nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
    "head_dim": 16})");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The message of the zero::Error `call` throws; checks it names the config and is no internal
// error, and that it came within a second.
std::string error_of(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    call();
    ADD_FAILURE() << "expected an error";
  } catch (const InternalError& e) {
    ADD_FAILURE() << "internal error: " << e.what();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_LT(seconds_since(start), 1.0) << message;
  EXPECT_FALSE(has(message, "internal")) << message;
  return message;
}

std::string config_error(const nlohmann::json& json) {
  std::string message;
  const std::string m = error_of([&] {
    try {
      TransformerConfig::from_hf_json(json, "some/config.json");
    } catch (const ConfigError& e) {
      message = e.what();
      throw;
    }
  });
  EXPECT_EQ(m, message) << "not a ConfigError: " << m;
  EXPECT_TRUE(has(message, "some/config.json")) << message;
  return message;
}

TEST(ConfigJsonHardening, SizesNearTheInt64EdgeAreOutOfRangeNotOverflowed) {
  const std::vector<nlohmann::json> edges = {
      nlohmann::json(int64_t{1} << 62), nlohmann::json((int64_t{1} << 62) + 12345),
      nlohmann::json(INT64_MAX), nlohmann::json(uint64_t{1} << 63), nlohmann::json(UINT64_MAX),
      nlohmann::json(1e300), nlohmann::json(4611686018427387904.0)};
  for (const char* key : {"vocab_size", "n_embd", "n_layer", "n_head", "n_inner", "n_positions"}) {
    for (const auto& value : edges) {
      nlohmann::json j = gpt2_json();
      j[key] = value;
      const std::string message = config_error(j);
      EXPECT_TRUE(has(message, std::string("'") + key + "'")) << message;
      EXPECT_TRUE(has(message, "out of range")) << message;
    }
  }
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "intermediate_size",
                          "max_position_embeddings"}) {
    for (const auto& value : edges) {
      nlohmann::json j = llama_json();
      j[key] = value;
      const std::string message = config_error(j);
      EXPECT_TRUE(has(message, std::string("'") + key + "'")) << message;
      EXPECT_TRUE(has(message, "out of range")) << message;
    }
  }
}

TEST(ConfigJsonHardening, OutOfRangeMessageGivesTheValueTheLimitAndTheFix) {
  nlohmann::json j = llama_json();
  j["num_hidden_layers"] = int64_t{1} << 40;
  const std::string message = config_error(j);
  EXPECT_TRUE(has(message, "'num_hidden_layers' = 1099511627776")) << message;
  EXPECT_TRUE(has(message, "from 1 to 10000")) << message;
  EXPECT_TRUE(has(message, "correct it")) << message;
}

TEST(ConfigJsonHardening, NLayer2To40IsRefusedAtOnceNotBuilt) {
  nlohmann::json j = gpt2_json();
  j["n_layer"] = int64_t{1} << 40;
  EXPECT_TRUE(has(config_error(j), "'n_layer' = 1099511627776"));
  // A config built in code is refused by the builder before any unit is made.
  TransformerConfig c = TransformerConfig::from_hf_json(gpt2_json(), "x");
  c.num_layers = int64_t{1} << 40;
  backend::CpuBackend cpu;
  EXPECT_TRUE(has(error_of([&] { build_transformer(c, cpu, DType::kF32); }), "'n_layer'"));
}

TEST(ConfigJsonHardening, FourTimesNEmbdCannotOverflow) {
  // n_inner defaults to 4 * n_embd; at 2^62 that product wrapped to 0 ("every size must be > 0").
  nlohmann::json j = gpt2_json();
  j["n_embd"] = int64_t{1} << 62;
  EXPECT_TRUE(has(config_error(j), "'n_embd' = 4611686018427387904"));
}

TEST(ConfigJsonHardening, DerivedProductsAreOverflowChecked) {
  // Every size within its own limit, but heads x head_dim x hidden x layers overflows int64.
  nlohmann::json j = llama_json();
  j["hidden_size"] = kHiddenSizeLimit.max;
  j["num_attention_heads"] = kHiddenSizeLimit.max;
  j["num_key_value_heads"] = kHiddenSizeLimit.max;
  j["head_dim"] = kHeadDimLimit.max;
  j["num_hidden_layers"] = kLayersLimit.max;
  j["intermediate_size"] = kIntermediateSizeLimit.max;
  const std::string message = config_error(j);
  EXPECT_TRUE(has(message, "parameter count")) << message;
  EXPECT_TRUE(has(message, "too large")) << message;
}

TEST(ConfigJsonHardening, LimitsThemselvesAreAccepted) {
  nlohmann::json j = gpt2_json();
  j["vocab_size"] = kVocabSizeLimit.max;
  j["n_positions"] = kPositionsLimit.max;
  const TransformerConfig c = TransformerConfig::from_hf_json(j, "x");
  EXPECT_EQ(c.vocab_size, 2147483647);
  EXPECT_GT(c.num_parameters(), int64_t{2147483647} * 64);
}

TEST(ConfigJsonHardening, SizesAreReadStrictly) {
  nlohmann::json j = gpt2_json();
  j["n_embd"] = 64.0;  // an integral float is what some writers emit
  EXPECT_EQ(TransformerConfig::from_hf_json(j, "x").hidden_size, 64);
  const std::vector<std::pair<nlohmann::json, const char*>> bad = {
      {64.5, "positive integer"}, {true, "positive integer"}, {"64", "positive integer"},
      {nlohmann::json::array({64}), "positive integer"}, {0, "out of range"},
      {-64, "out of range"}, {-1e300, "out of range"}};
  for (const auto& [value, problem] : bad) {
    j["n_embd"] = value;
    const std::string message = config_error(j);
    EXPECT_TRUE(has(message, "'n_embd'") && has(message, problem)) << message;
  }
}

TEST(ConfigJsonHardening, HeadCountsAreBoundedByTheirParents) {
  nlohmann::json j = llama_json();
  j["num_attention_heads"] = 128;  // more heads than hidden channels (64)
  EXPECT_TRUE(has(config_error(j), "'num_attention_heads' = 128"));
  j = llama_json();
  j["num_key_value_heads"] = 8;  // more than the 4 attention heads
  EXPECT_TRUE(has(config_error(j), "'num_key_value_heads' = 8"));
  j = llama_json();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = uint64_t{1} << 63;
  EXPECT_TRUE(has(config_error(j), "'sliding_window'"));
}

TEST(ConfigJsonHardening, WrongShapesAreCleanErrors) {
  for (const char* archs : {"[]", "[5]", "\"GPT2LMHeadModel\"", "{\"a\": 1}",
                            "[\"GPT2LMHeadModel\", \"LlamaForCausalLM\"]", "[[]]"}) {
    nlohmann::json j = gpt2_json();
    j["architectures"] = nlohmann::json::parse(archs);
    const std::string message = config_error(j);
    EXPECT_TRUE(has(message, "'architectures'") && has(message, "GPT2LMHeadModel")) << message;
  }
  nlohmann::json j = llama_json();
  j["rope_parameters"] = {{"rope_theta", "big"}};
  EXPECT_TRUE(has(config_error(j), "rope_theta"));
  j = llama_json();
  j["layer_types"] = "full_attention";
  EXPECT_TRUE(has(config_error(j), "layer_types"));
  j = llama_json();
  j["model_type"] = 5;
  EXPECT_TRUE(has(config_error(j), "'model_type'"));
  j = gpt2_json();
  j["layer_norm_epsilon"] = "small";
  EXPECT_TRUE(has(config_error(j), "layer_norm_epsilon"));
  EXPECT_TRUE(has(config_error(nlohmann::json::array()), "JSON object"));
}

TEST(ConfigJsonHardening, ModelLargerThanMemoryIsRefusedBeforeAllocating) {
  // Within every limit: hidden 2^20, 10,000 layers. ~10^17 parameters; no machine holds them.
  nlohmann::json j = llama_json();
  j["hidden_size"] = kHiddenSizeLimit.max;
  j["num_attention_heads"] = 8192;
  j["num_key_value_heads"] = 8192;
  j["head_dim"] = 128;
  j["intermediate_size"] = 4 * kHiddenSizeLimit.max;
  j["num_hidden_layers"] = kLayersLimit.max;
  const TransformerConfig c = TransformerConfig::from_hf_json(j, "big/config.json");
  backend::CpuBackend cpu;
  const std::string message =
      error_of([&] { build_transformer(c, cpu, DType::kF32, "big/config.json"); });
  EXPECT_TRUE(has(message, "big/config.json")) << message;
  EXPECT_TRUE(has(message, std::to_string(c.num_parameters()) + " parameters")) << message;
  EXPECT_TRUE(has(message, "GiB")) << message;
  EXPECT_TRUE(has(message, "more than this machine's")) << message;
  EXPECT_TRUE(has(message, "num_hidden_layers")) << message;
}

class ConfigJsonFile : public io::testing::IoScratch {
 protected:
  std::string file_error(const std::string& p) {
    std::string message;
    const std::string m = error_of([&] {
      try {
        TransformerConfig::from_hf_file(p);
      } catch (const FileError& e) {
        message = e.what();
        throw;
      }
    });
    EXPECT_EQ(m, message) << "not a FileError: " << m;
    EXPECT_TRUE(has(message, p)) << message;
    return message;
  }
};

TEST_F(ConfigJsonFile, DeeplyNestedUnusedKeyIsAnErrorNotAStackOverflow) {
  std::string text = gpt2_json().dump();
  text.pop_back();  // drop the closing brace
  text += ", \"unused\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_TRUE(has(file_error(write("config.json", text)), "deeper than"));
}

TEST_F(ConfigJsonFile, ManyMegabyteConfigIsRefused) {
  std::string text = gpt2_json().dump();
  text.pop_back();
  text += ", \"padding\": \"" + std::string(5u << 20, 'x') + "\"}";
  EXPECT_TRUE(has(file_error(write("config.json", text)), "MiB"));
}

TEST_F(ConfigJsonFile, FifoDirectoryAndBadJsonAreFileErrors) {
  const std::string pipe = fifo("config.json");
  zero::testing::FifoWatchdog watchdog(pipe, 5.0);
  EXPECT_TRUE(has(file_error(pipe), "FIFO"));
  EXPECT_FALSE(watchdog.fired());
  EXPECT_TRUE(has(file_error(dir_.string()), "directory"));
  EXPECT_TRUE(has(file_error(write("bad.json", "{\"n_layer\": ")), "not valid JSON"));
  EXPECT_TRUE(has(file_error(path("missing.json")), "No such file"));
}

TEST_F(ConfigJsonFile, OrdinaryConfigStillLoads) {
  EXPECT_EQ(TransformerConfig::from_hf_file(write("config.json", gpt2_json().dump())).num_layers,
            2);
}

}  // namespace config_json_hardening_test
}  // namespace zero::model
