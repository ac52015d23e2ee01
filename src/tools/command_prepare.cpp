// `zero prepare --out train.bin [--val-out val.bin --val-fraction 0.1] [--tokenizer T | --model
// DIR] [--field NAME | --prompt-field P --response-field R] [--threads N] FILE...`: text or
// JSONL files to token shards. The work is data::prepare_corpus; this file only turns flags into
// its options, picks the tokenizer and prints counts.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parse_number.h"
#include "data/byte_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/parallel_for.h"
#include "data/prepare_text.h"
#include "model/transformer_config.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {
namespace {

namespace fs = std::filesystem;

constexpr double kDefaultValFraction = 0.1;
constexpr int64_t kMaxThreads = 1024;

double parse_fraction(const std::string& text) {
  const std::optional<double> value = parse_finite_double(text);
  if (!value || *value <= 0.0 || *value >= 1.0) {
    throw ConfigError("zero prepare: --val-fraction must be a number in (0, 1), got \"" +
                      ArgParser::shown(text) + "\"");
  }
  return *value;
}

int parse_threads(const ArgParser& parser) {
  if (parser.get("threads").empty()) return data::default_thread_count();
  const int64_t threads = parser.get_int("threads");
  if (threads < 1 || threads > kMaxThreads) {
    throw ConfigError("zero prepare: --threads must be from 1 to " + std::to_string(kMaxThreads) +
                      ", got " + std::to_string(threads));
  }
  return static_cast<int>(threads);
}

// --tokenizer wins; else --model DIR's tokenizer.json when it has one; else the byte tokenizer.
std::unique_ptr<data::Tokenizer> choose_tokenizer(const std::string& tokenizer_arg,
                                                  const std::string& model_dir) {
  if (!tokenizer_arg.empty()) return data::load_hf_tokenizer(tokenizer_arg);
  if (!model_dir.empty()) {
    std::error_code error;
    if (!fs::is_directory(model_dir, error)) {
      throw ConfigError("zero prepare: --model must be a Hugging Face model folder (its "
                        "tokenizer.json is used), got \"" + ArgParser::shown(model_dir) +
                        "\"; to name a tokenizer file directly use --tokenizer");
    }
    const fs::path folder(model_dir);
    if (fs::exists(folder / "tokenizer.json", error) ||
        fs::exists(folder / "tokenizer.json.gz", error)) {
      return data::load_hf_tokenizer(model_dir);
    }
    std::printf("note: %s has no tokenizer.json; using the byte tokenizer (vocabulary 256)\n",
                model_dir.c_str());
  }
  return std::make_unique<data::ByteTokenizer>();
}

// Ids the model cannot embed would fail every training step; say so now.
void check_model_vocabulary(const std::string& model_dir, const data::Tokenizer& tokenizer) {
  if (model_dir.empty()) return;
  const fs::path config = fs::path(model_dir) / "config.json";
  std::error_code error;
  if (!fs::exists(config, error)) return;
  const int64_t vocab = model::TransformerConfig::from_hf_file(config.string()).vocab_size;
  if (tokenizer.vocab_size() > vocab) {
    throw ConfigError("zero prepare: " + tokenizer.description() + " has " +
                      std::to_string(tokenizer.vocab_size()) + " tokens but the model in " +
                      model_dir + " embeds only " + std::to_string(vocab) +
                      " (config.json vocab_size); give the model's own tokenizer with "
                      "--tokenizer");
  }
}

}  // namespace

int run_prepare(const Args& args) {
  // ArgParser knows flags only; the input files are the arguments that are not flags or values.
  std::vector<std::string> inputs, flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) == 0 || ArgParser::is_help(arg)) {
      flags.push_back(arg);
      const bool takes_value = arg.find('=') == std::string::npos && !ArgParser::is_help(arg);
      if (takes_value && i + 1 < args.size()) flags.push_back(args[++i]);
    } else {
      inputs.push_back(arg);
    }
  }
  ArgParser parser("prepare", flags);
  parser.synopsis(
      "zero prepare --out TRAIN.bin [--val-out VAL.bin --val-fraction F] [--tokenizer T] "
      "[--field NAME | --prompt-field P --response-field R] FILE...",
      "Plain text files are one document each; with --field or --prompt-field the files are JSONL\n"
      "(one JSON object per line, one document per line). Documents are separated by the\n"
      "tokenizer's EOS token (the byte tokenizer has none). Prompt/response records write a shard\n"
      "with a loss mask: the prompt tokens are not trained on.");
  parser.option("out", "", "the training shard to write (.bin); input files follow the flags")
      .option("val-out", "", "also write a validation shard (.bin) from the end of the data")
      .option("val-fraction", "", "fraction of the tokens for --val-out (default 0.1; JSONL: "
                                  "whole records)")
      .option("tokenizer", "", "a Hugging Face tokenizer.json or the folder holding it "
                               "(default: --model's, else the byte tokenizer)")
      .option("model", "", "a Hugging Face model folder: its tokenizer.json is the default "
                           "--tokenizer, and its vocabulary must hold every token id")
      .option("field", "", "JSONL input: the string field holding each record's text")
      .option("prompt-field", "", "JSONL input: the prompt field (masked out of the loss)")
      .option("response-field", "", "JSONL input: the response field (trained on)")
      .option("threads", "", "tokenizing threads (default: one per core)");
  if (!parser.parse()) return 0;
  const std::string out = parser.get("out"), val_out = parser.get("val-out");
  const std::string fraction_text = parser.get("val-fraction");
  if (out.empty()) throw ConfigError("zero prepare: --out FILE.bin is required\n" + parser.usage());
  if (!fraction_text.empty() && val_out.empty()) {
    throw ConfigError(
        "zero prepare: --val-fraction needs --val-out FILE.bin to write the split to");
  }

  data::PrepareOptions options;
  options.inputs = inputs;
  options.train_out = out;
  options.val_out = val_out;
  options.val_fraction =
      fraction_text.empty() ? kDefaultValFraction : parse_fraction(fraction_text);
  options.jsonl.text = parser.get("field");
  options.jsonl.prompt = parser.get("prompt-field");
  options.jsonl.response = parser.get("response-field");
  options.threads = parse_threads(parser);
  const std::string model_dir = parser.get("model");
  const std::unique_ptr<data::Tokenizer> tokenizer =
      choose_tokenizer(parser.get("tokenizer"), model_dir);
  check_model_vocabulary(model_dir, *tokenizer);
  options.tokenizer = tokenizer.get();

  const data::PrepareResult result = data::prepare_corpus(options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::printf("%s: %lld tokens\n", inputs[i].c_str(),
                static_cast<long long>(result.file_tokens[i]));
  }
  const auto targets = [&](int64_t count) {
    return result.masked ? ", " + std::to_string(count) + " of them loss targets" : std::string();
  };
  std::printf("%lld documents; tokenizer: %s\n", static_cast<long long>(result.documents),
              tokenizer->description().c_str());
  std::printf("wrote %s: %lld tokens%s\n", out.c_str(), static_cast<long long>(result.train_tokens),
              targets(result.train_targets).c_str());
  if (!val_out.empty()) {
    std::printf("wrote %s: %lld tokens%s\n", val_out.c_str(),
                static_cast<long long>(result.val_tokens), targets(result.val_targets).c_str());
  }
  return 0;
}

}  // namespace zero::tools
