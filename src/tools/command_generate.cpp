// `zero generate`: text from a Hugging Face model folder (or a built-in preset, for speed
// checks), with a key/value cache, on the CPU or a GPU. The prompt comes as text (encoded with
// the folder's tokenizer.json) or as ids; sampling follows Hugging Face's generate() and takes
// its defaults from generation_config.json. Output: the continuation as text, streamed while it
// is generated (ids without a tokenizer), or one JSON object with --json; the speed goes to
// standard error.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "data/hf_tokenizer.h"
#include "engine/checkpoint_convert.h"
#include "generation/generation_config.h"
#include "generation/generator.h"
#include "generation/inference_weights.h"
#include "io/input_file.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {
// Helpers of this command only (a named namespace: the tools are compiled as one unit).
namespace generate_command {

namespace fs = std::filesystem;

constexpr uint64_t kMaxPromptBytes = 64ull << 20;
constexpr int64_t kMaxSequences = 4096;

void write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw FileError("zero generate: writing to standard output failed");
  }
}

// "1,2,3" -> ids (strict: each a whole non-negative number).
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const std::optional<int64_t> id = parse_int64(item);
    if (!id || *id < 0) {
      throw ConfigError("zero generate: " + flag + " takes token ids separated by commas (e.g. "
                        "15496,11,995); \"" + ArgParser::shown(item) + "\" is not one");
    }
    ids.push_back(*id);
    start = comma + 1;
  }
  return ids;
}

std::string device_name(const std::string& requested) {
  if (requested != "auto") return requested;
  return backend::cuda_visible() ? "cuda" : "cpu";
}

DType resolve_dtype(const std::string& requested, const std::string& device) {
  if (requested == "auto") return device.rfind("cuda", 0) == 0 ? DType::kBF16 : DType::kF32;
  const DType dtype = parse_dtype(requested, "--dtype");
  if (dtype != DType::kF32 && dtype != DType::kF64 && dtype != DType::kBF16 &&
      dtype != DType::kF16) {
    throw ConfigError("zero generate: --dtype must be auto, f32, bf16, f16 or f64, got " +
                      requested);
  }
  return dtype;
}

std::unique_ptr<data::Tokenizer> find_tokenizer(const std::string& flag, const std::string& model) {
  if (!flag.empty()) return data::load_hf_tokenizer(flag);
  std::error_code ec;
  const bool in_folder = fs::is_directory(model, ec) &&
                         (fs::exists(fs::path(model) / "tokenizer.json", ec) ||
                          fs::exists(fs::path(model) / "tokenizer.json.gz", ec));
  return in_folder ? data::load_hf_tokenizer(model) : nullptr;
}

std::vector<uint32_t> as_u32(const std::vector<int64_t>& ids) {
  return std::vector<uint32_t>(ids.begin(), ids.end());
}

// Streams one sequence's text as it grows: a token may end in the middle of a character (byte
// fallback), so text is printed up to the last complete piece and the rest waits.
class TextStream {
 public:
  explicit TextStream(const data::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void add(int64_t id) {
    ids_.push_back(static_cast<uint32_t>(id));
    const std::string text = tokenizer_.decode(ids_, true);
    // U+FFFD at the end: an incomplete UTF-8 sequence that the next token may finish.
    const bool pending = text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
    if (pending || text.size() <= printed_ || text.compare(0, printed_, shown_) != 0) return;
    write_stdout(text.substr(printed_));
    shown_ = text;
    printed_ = text.size();
  }
  // The end of the run: what is still held back (a character the last token left incomplete)
  // is printed as the non-streamed text shows it.
  void finish() {
    const std::string text = tokenizer_.decode(ids_, true);
    if (text.size() > printed_ && text.compare(0, printed_, shown_) == 0) {
      write_stdout(text.substr(printed_));
    }
    write_stdout("\n");
  }

 private:
  const data::Tokenizer& tokenizer_;
  std::vector<uint32_t> ids_;
  std::string shown_;
  size_t printed_ = 0;
};

// --json and --ignore-eos may be given bare (switches) or with a value.
Args with_switch_values(const Args& args) {
  const std::string switches[] = {"--json", "--ignore-eos"};
  const std::string values[] = {"true", "false", "1", "0", "yes", "no"};
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool is_switch = std::find(std::begin(switches), std::end(switches), args[i]) !=
                           std::end(switches);
    const bool valued = i + 1 < args.size() && std::find(std::begin(values), std::end(values),
                                                         args[i + 1]) != std::end(values);
    out.push_back(is_switch && !valued ? args[i] + "=true" : args[i]);
  }
  return out;
}

std::string ids_text(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
  return out;
}

}  // namespace generate_command

int run_generate(const Args& args) {
  using namespace generate_command;
  ArgParser parser("generate", with_switch_values(args));
  parser.synopsis(
      "zero generate --model DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3) "
      "[flags]",
      "  Continues the prompt with the model in DIR: a Hugging Face folder, or a checkpoint\n"
      "  folder of `zero train --save` (its latest checkpoint, or --tag; give --tokenizer); a\n"
      "  preset name such as gpt2-124m gives random weights, for speed checks. Sampling\n"
      "  defaults come from DIR/generation_config.json as in transformers; flags override them.\n");
  parser.option("model", "", "a Hugging Face model folder, a checkpoint folder, or a preset")
      .option("tag", "", "with a checkpoint folder: the checkpoint to load (default: latest)")
      .option("prompt", "", "the prompt text (encoded with the tokenizer)")
      .option("prompt-file", "", "a file holding the prompt text")
      .option("prompt-ids", "", "the prompt as token ids, e.g. 15496,11,995")
      .option("tokenizer", "", "tokenizer.json or its folder (default: the model folder's)")
      .option("add-special-tokens", "true", "encode the prompt with BOS/EOS as HF's tokenizer() does")
      .option("max-new-tokens", "", "tokens to generate per sequence (default: the generation "
              "config's, else 64)")
      .option("do-sample", "", "true: sample; false: greedy (default: the generation config's, "
              "else false)")
      .option("temperature", "", "divide the logits by this (default: config, else 1)")
      .option("top-k", "", "sample among the k most likely tokens, 0 = all (default: config, else 50)")
      .option("top-p", "", "sample among the most likely tokens holding this mass (default: "
              "config, else 1)")
      .option("repetition-penalty", "", "HF's repetition penalty (default: config, else 1)")
      .option("seed", "0", "seed of the sampling")
      .option("num-sequences", "1", "continuations of the prompt, generated side by side")
      .option("stop-ids", "", "token ids that end a sequence (default: the model's eos_token_id)")
      .option("ignore-eos", "false", "never stop before --max-new-tokens")
      .option("device", "auto", "auto (cuda when a GPU is visible), cpu, sim, cuda, cuda:N")
      .option("dtype", "auto", "weights and activations: auto (bf16 on cuda, f32 on cpu), f32, "
              "bf16, f16, f64 (cpu)")
      .option("allow-long-sequences", "false", "rotary models: run past max_position_embeddings")
      .option("json", "false", "print one JSON object (ids, text, speed) instead of the text");
  if (!parser.parse()) return 0;

  const std::string model_arg = parser.get("model");
  if (model_arg.empty()) {
    throw ConfigError("zero generate needs --model DIR (a Hugging Face model folder)\n" +
                      parser.usage());
  }
  const int prompt_sources = !parser.get("prompt").empty() + !parser.get("prompt-file").empty() +
                             !parser.get("prompt-ids").empty();
  if (prompt_sources != 1) {
    throw ConfigError("zero generate needs exactly one of --prompt TEXT, --prompt-file FILE and "
                      "--prompt-ids 1,2,3; got " + std::to_string(prompt_sources));
  }
  const std::string device = device_name(parser.get("device"));
  const DType dtype = resolve_dtype(parser.get("dtype"), device);
  std::error_code ec;
  // A Hugging Face folder has a config.json; a checkpoint folder a `latest` file.
  const bool folder = fs::is_regular_file(fs::path(model_arg) / "config.json", ec);
  const bool checkpoint = !folder && engine::is_checkpoint_dir(model_arg);
  if (!folder && !checkpoint && fs::is_directory(model_arg, ec)) {
    throw FileError("zero generate: " + model_arg + " holds neither config.json (a Hugging Face "
                    "model folder) nor latest (a zero.cpp checkpoint folder)");
  }
  if (!checkpoint && !parser.get("tag").empty()) {
    throw ConfigError("zero generate: --tag picks a checkpoint of a checkpoint folder; " +
                      model_arg + " is not one");
  }
  if (checkpoint && dtype == DType::kF64) {
    throw ConfigError("zero generate: a checkpoint holds f32 weights; use --dtype f32, bf16 or "
                      "f16 (f64 needs a Hugging Face folder)");
  }
  const generation::GenerationDefaults defaults =
      folder ? generation::read_generation_defaults(model_arg) : generation::GenerationDefaults{};
  const std::unique_ptr<data::Tokenizer> tokenizer =
      find_tokenizer(parser.get("tokenizer"), folder ? model_arg : std::string());

  std::vector<int64_t> prompt;
  if (!parser.get("prompt-ids").empty()) {
    prompt = parse_id_list(parser.get("prompt-ids"), "--prompt-ids");
  } else {
    if (!tokenizer) {
      throw ConfigError("zero generate: a text prompt needs a tokenizer: " + model_arg +
                        " has no tokenizer.json; pass --tokenizer PATH or --prompt-ids");
    }
    const std::string text = !parser.get("prompt").empty()
                                 ? parser.get("prompt")
                                 : io::read_text_file(parser.get("prompt-file"), "the prompt",
                                                      kMaxPromptBytes);
    for (uint32_t id : tokenizer->encode(text, parser.get_bool("add-special-tokens"))) {
      prompt.push_back(id);
    }
  }

  generation::GenerationOptions options;
  auto int_or = [&](const char* flag, std::optional<int64_t> fallback, int64_t builtin) {
    return parser.get(flag).empty() ? fallback.value_or(builtin) : parser.get_int(flag);
  };
  auto double_or = [&](const char* flag, std::optional<double> fallback, double builtin) {
    return parser.get(flag).empty() ? fallback.value_or(builtin) : parser.get_double(flag);
  };
  options.max_new_tokens = int_or("max-new-tokens", defaults.max_new_tokens, 64);
  options.num_sequences = parser.get_int("num-sequences");
  if (options.num_sequences < 1 || options.num_sequences > kMaxSequences) {
    throw ConfigError("zero generate: --num-sequences must be from 1 to " +
                      std::to_string(kMaxSequences) + ", got " + parser.get("num-sequences"));
  }
  options.sampling.greedy = !(parser.get("do-sample").empty() ? defaults.do_sample.value_or(false)
                                                              : parser.get_bool("do-sample"));
  options.sampling.temperature = double_or("temperature", defaults.temperature, 1.0);
  options.sampling.top_k = int_or("top-k", defaults.top_k, 50);
  options.sampling.top_p = double_or("top-p", defaults.top_p, 1.0);
  options.sampling.repetition_penalty =
      double_or("repetition-penalty", defaults.repetition_penalty, 1.0);
  options.sampling.seed = static_cast<uint64_t>(parser.get_int("seed"));
  generation::validate(options.sampling);
  if (!parser.get_bool("ignore-eos")) {
    options.stop_token_ids = parser.get("stop-ids").empty()
                                 ? defaults.eos_token_ids
                                 : parse_id_list(parser.get("stop-ids"), "--stop-ids");
  }
  options.allow_long_sequences = parser.get_bool("allow-long-sequences");
  for (const std::string& setting : defaults.not_applied) {
    std::fprintf(stderr, "zero generate: note: generation_config.json sets %s, which zero.cpp "
                 "does not apply (sampling and greedy search only)\n", setting.c_str());
  }

  std::unique_ptr<backend::Backend> backend = backend::create_backend(device);
  // Weights load straight into the run's dtype (16 bits on a GPU: no f32 copy ever exists there)
  // and without a gradient buffer.
  const DType storage = generation::inference_storage_dtype(*backend, dtype);
  std::unique_ptr<model::Model> model;
  if (folder) {
    model = model::load_hf_model_for_inference(model_arg, *backend, storage);
  } else if (checkpoint) {
    model = engine::load_checkpoint_model(model_arg, parser.get("tag"), *backend, storage);
    if (options.stop_token_ids.empty() && !parser.get_bool("ignore-eos") &&
        parser.get("stop-ids").empty()) {
      // A model trained from a Hugging Face folder keeps its config.json, eos included.
      options.stop_token_ids = generation::eos_token_ids_of(model->config()->source_json,
                                                            model_arg + "'s model_config");
    }
  } else {
    // Random weights are drawn in f32 (or f64) and then converted.
    model = model::build_transformer_for_inference(model::preset_config(model_arg), *backend,
                                                   dtype == DType::kF64 ? dtype : DType::kF32);
    model::init_parameters(*model, options.sampling.seed);
  }
  generation::prepare_inference_weights(*model, dtype);

  generation::Generator generator(*model);
  const bool json = parser.get_bool("json");
  const bool stream = !json && tokenizer && options.num_sequences == 1;
  std::unique_ptr<TextStream> text_stream;
  if (stream) text_stream = std::make_unique<TextStream>(*tokenizer);
  const std::vector<generation::GeneratedSequence> sequences = generator.generate(
      prompt, options, [&](int64_t, int64_t id) {
        if (text_stream) text_stream->add(id);
      });

  auto text_of = [&](const generation::GeneratedSequence& s) {
    return tokenizer ? tokenizer->decode(as_u32(s.tokens), true) : ids_text(s.tokens);
  };
  const generation::GenerationStats& stats = generator.stats();
  const double decode_rate =
      stats.decode_seconds > 0
          ? static_cast<double>(stats.decode_steps * options.num_sequences) / stats.decode_seconds
          : 0.0;
  if (json) {
    nlohmann::json out;
    out["prompt_ids"] = prompt;
    out["sequences"] = nlohmann::json::array();
    for (const auto& s : sequences) {
      nlohmann::json entry{{"ids", s.tokens}, {"stopped", s.stopped}};
      if (tokenizer) entry["text"] = tokenizer->decode(as_u32(s.tokens), true);
      out["sequences"].push_back(entry);
    }
    out["device"] = device;
    out["dtype"] = dtype_name(dtype);
    out["prompt_tokens"] = stats.prompt_tokens;
    out["generated_tokens"] = stats.generated_tokens;
    out["prefill_seconds"] = stats.prefill_seconds;
    out["decode_seconds"] = stats.decode_seconds;
    out["decode_tokens_per_s"] = decode_rate;
    out["cache_bytes"] = stats.cache_bytes;
    write_stdout(out.dump() + "\n");
    return 0;
  }
  if (stream) {
    text_stream->finish();
  } else {
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (sequences.size() > 1) write_stdout("--- sequence " + std::to_string(i) + " ---\n");
      write_stdout(text_of(sequences[i]) + "\n");
    }
  }
  std::fprintf(stderr,
               "zero generate: %s %s, prompt %lld tokens, %lld new tokens; prefill %.3f s, "
               "decode %.1f tokens/s, cache %.1f MiB\n",
               device.c_str(), dtype_name(dtype), static_cast<long long>(stats.prompt_tokens),
               static_cast<long long>(stats.generated_tokens), stats.prefill_seconds, decode_rate,
               static_cast<double>(stats.cache_bytes) / (1 << 20));
  return 0;
}

}  // namespace zero::tools
