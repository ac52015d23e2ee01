// `zero convert CKPT_DIR OUT_DIR [--tag TAG] [--dtype f32|bf16|f16]`: a training checkpoint to a
// Hugging Face model folder.
#include <cstdio>

#include "core/error.h"
#include "engine/checkpoint_convert.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {

int run_convert(const Args& args) {
  std::vector<std::string> positional, flags;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) == 0 || ArgParser::is_help(args[i])) {
      flags.push_back(args[i]);
      if (args[i].find('=') == std::string::npos && i + 1 < args.size() &&
          !ArgParser::is_help(args[i])) {
        flags.push_back(args[++i]);
      }
    } else {
      positional.push_back(args[i]);
    }
  }
  ArgParser parser("convert", flags);
  parser.synopsis("zero convert CKPT_DIR OUT_DIR [--tag TAG] [--dtype f32|bf16|f16]",
                  "  CKPT_DIR is a `zero train --save` directory; OUT_DIR receives config.json and "
                  "model.safetensors\n");
  parser.option("tag", "", "checkpoint tag (default: the one in CKPT_DIR/latest)")
      .option("dtype", "f32", "dtype of the saved weights: f32, bf16 or f16");
  if (!parser.parse()) return 0;
  if (positional.size() != 2) {
    throw ConfigError("zero convert takes two paths, CKPT_DIR and OUT_DIR\n" + parser.usage());
  }
  engine::convert_checkpoint_to_hf(positional[0], parser.get("tag"), positional[1],
                                   parse_dtype(parser.get("dtype"), "--dtype"));
  std::printf("wrote %s/config.json and %s/model.safetensors\n", positional[1].c_str(), positional[1].c_str());
  return 0;
}

}  // namespace zero::tools
