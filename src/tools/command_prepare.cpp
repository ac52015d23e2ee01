// `zero prepare --out train.bin [--val-out val.bin --val-fraction 0.1] TEXT_FILE...`: text files
// to llm.c .bin token shards with the byte-level tokenizer (vocabulary 256). The work is
// data::prepare_text_files; this file only turns flags into its arguments and prints counts.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parse_number.h"
#include "data/prepare_text.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {
namespace {

constexpr double kDefaultValFraction = 0.1;

double parse_fraction(const std::string& text) {
  const std::optional<double> value = parse_finite_double(text);
  if (!value || *value <= 0.0 || *value >= 1.0) {
    throw ConfigError("zero prepare: --val-fraction must be a number in (0, 1), got \"" +
                      ArgParser::shown(text) + "\"");
  }
  return *value;
}

}  // namespace

int run_prepare(const Args& args) {
  // ArgParser knows flags only; the text files are the arguments that are not flags or values.
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
  parser.synopsis("zero prepare --out TRAIN.bin [--val-out VAL.bin --val-fraction F] TEXT_FILE...");
  parser.option("out", "", "the training shard to write (.bin); text files follow the flags")
      .option("val-out", "", "also write a validation shard (.bin) from the end of the text")
      .option("val-fraction", "", "fraction of the tokens for --val-out (default 0.1)");
  if (!parser.parse()) return 0;
  const std::string out = parser.get("out"), val_out = parser.get("val-out");
  const std::string fraction_text = parser.get("val-fraction");
  if (out.empty()) throw ConfigError("zero prepare: --out FILE.bin is required\n" + parser.usage());
  if (!fraction_text.empty() && val_out.empty()) {
    throw ConfigError(
        "zero prepare: --val-fraction needs --val-out FILE.bin to write the split to");
  }
  const double fraction =
      fraction_text.empty() ? kDefaultValFraction : parse_fraction(fraction_text);

  const data::PrepareResult result = data::prepare_text_files(inputs, out, val_out, fraction);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::printf("%s: %lld tokens\n", inputs[i].c_str(),
                static_cast<long long>(result.file_tokens[i]));
  }
  std::printf("wrote %s: %lld tokens (byte tokenizer, vocabulary %lld)\n", out.c_str(),
              static_cast<long long>(result.train_tokens),
              static_cast<long long>(data::kByteVocabSize));
  if (!val_out.empty()) {
    std::printf("wrote %s: %lld tokens\n", val_out.c_str(),
                static_cast<long long>(result.val_tokens));
  }
  return 0;
}

}  // namespace zero::tools
