// `zero prepare --out train.bin [--val-out val.bin --val-fraction 0.1] TEXT_FILE...`: text files
// to token shards with the byte-level tokenizer (vocabulary 256).
#include <cstdio>

#include "core/error.h"
#include "data/prepare_text.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {

int run_prepare(const Args& args) {
  std::vector<std::string> inputs, flags;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) == 0) {
      flags.push_back(args[i]);
      if (args[i].find('=') == std::string::npos && args[i] != "--help" && i + 1 < args.size()) {
        flags.push_back(args[++i]);
      }
    } else {
      inputs.push_back(args[i]);
    }
  }
  ArgParser parser("prepare", flags);
  parser.option("out", "", "the training shard to write (.bin)")
      .option("val-out", "", "a validation shard to write (.bin), from the end of the text")
      .option("val-fraction", "0.1", "fraction of the tokens that go to --val-out");
  if (!parser.parse()) return 0;
  if (parser.get("out").empty()) throw ConfigError("zero prepare: --out FILE.bin is required");
  const auto result = data::prepare_text_files(inputs, parser.get("out"), parser.get("val-out"),
                                               std::stod(parser.get("val-fraction")));
  std::printf("wrote %s: %lld tokens (byte tokenizer, vocabulary 256)\n", parser.get("out").c_str(),
              static_cast<long long>(result.train_tokens));
  if (!parser.get("val-out").empty()) {
    std::printf("wrote %s: %lld tokens\n", parser.get("val-out").c_str(), static_cast<long long>(result.val_tokens));
  }
  return 0;
}

}  // namespace zero::tools
