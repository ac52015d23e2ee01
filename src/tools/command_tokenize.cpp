// `zero tokenize --tokenizer DIR|tokenizer.json [FILE]`: the token ids of FILE (or standard
// input), encoded as one text, printed as one JSON array on one line; `--decode` reads such an
// array and prints the text. The quickest way to check zero.cpp's tokenizer against Hugging
// Face's: `tokenizer.encode(text, add_special_tokens=False).ids` must print the same array.
#include "tools/command.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "tools/arg_parser.h"

namespace zero::tools {
namespace {

// Files bigger than this are not one text anyone tokenizes in one go.
constexpr uint64_t kMaxInputBytes = 4ull << 30;
constexpr const char* kSwitches[] = {"add-special-tokens", "decode", "skip-special-tokens"};

std::string read_stdin() {
  std::string text;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = ::read(STDIN_FILENO, buffer, sizeof(buffer))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("zero tokenize: reading standard input failed");
    }
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxInputBytes) {
      throw FileError("zero tokenize: standard input is over " + std::to_string(kMaxInputBytes) +
                      " bytes; split it");
    }
  }
  return text;
}

void write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw FileError("zero tokenize: writing to standard output failed");
  }
}

std::string ids_as_json(const std::vector<uint32_t>& ids) {
  std::string out = "[";
  out.reserve(ids.size() * 7 + 2);
  char number[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    const auto end = std::to_chars(number, number + sizeof(number), ids[i]).ptr;
    out.append(number, static_cast<size_t>(end - number));
  }
  out += "]\n";
  return out;
}

std::vector<uint32_t> ids_from_json(const std::string& text, const std::string& source) {
  const nlohmann::json value = io::parse_json_bounded(text, source, "the token ids to decode");
  if (!value.is_array()) {
    throw ConfigError("zero tokenize --decode: " + source +
                      " must hold one JSON array of token ids, e.g. [15496, 11, 995]");
  }
  std::vector<uint32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_number_unsigned() || value[i].get<uint64_t>() > 0xFFFFFFFFull) {
      throw ConfigError("zero tokenize --decode: " + source + ": element " + std::to_string(i) +
                        " is " + io::json_excerpt(value[i]) +
                        ", not a token id (a non-negative integer)");
    }
    ids.push_back(static_cast<uint32_t>(value[i].get<uint64_t>()));
  }
  return ids;
}

}  // namespace

int run_tokenize(const Args& args) {
  // FILE is positional; the switches take no value (given as --name, or --name=true|false).
  std::vector<std::string> files, flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (ArgParser::is_help(arg)) {
      flags.push_back(arg);
    } else if (arg.rfind("--", 0) == 0) {
      bool is_switch = false;
      for (const char* name : kSwitches) is_switch = is_switch || arg == std::string("--") + name;
      flags.push_back(is_switch ? arg + "=true" : arg);
      if (!is_switch && arg.find('=') == std::string::npos && i + 1 < args.size()) {
        flags.push_back(args[++i]);
      }
    } else {
      files.push_back(arg);
    }
  }
  ArgParser parser("tokenize", flags);
  parser.synopsis(
      "zero tokenize --tokenizer DIR|tokenizer.json [--add-special-tokens] [FILE]\n"
      "       zero tokenize --tokenizer DIR|tokenizer.json --decode [--skip-special-tokens] [FILE]",
      "  Encodes FILE (default: standard input) as one UTF-8 text and prints its token ids as one\n"
      "  JSON array; with --decode, reads a JSON array of ids and prints their text. DIR is a\n"
      "  Hugging Face model folder holding tokenizer.json (or tokenizer.json.gz).\n");
  parser.option("tokenizer", "", "the tokenizer: a folder with tokenizer.json, or the file")
      .option("add-special-tokens", "false",
              "add the post-processor's special tokens (BOS/EOS) around the text")
      .option("decode", "false", "read a JSON array of ids and print the text")
      .option("skip-special-tokens", "false", "with --decode: leave special tokens out");
  if (!parser.parse()) return 0;
  if (files.size() > 1) {
    throw ConfigError("zero tokenize takes at most one FILE (the text is encoded as one), got " +
                      std::to_string(files.size()) + "\n" + parser.usage());
  }
  const std::string tokenizer_path = parser.get("tokenizer");
  if (tokenizer_path.empty()) {
    throw ConfigError("zero tokenize needs --tokenizer DIR|tokenizer.json (a Hugging Face model "
                      "folder or its tokenizer.json)\n" + parser.usage());
  }
  const bool decode = parser.get_bool("decode");
  if (!decode && parser.get_bool("skip-special-tokens")) {
    throw ConfigError("zero tokenize: --skip-special-tokens goes with --decode");
  }
  if (decode && parser.get_bool("add-special-tokens")) {
    throw ConfigError("zero tokenize: --add-special-tokens is for encoding; it cannot go with "
                      "--decode");
  }
  const std::unique_ptr<data::Tokenizer> tokenizer = data::load_hf_tokenizer(tokenizer_path);
  const std::string source = files.empty() ? "standard input" : files[0];
  const std::string input = files.empty()
                                ? read_stdin()
                                : io::read_text_file(files[0], decode ? "the ids to decode"
                                                                      : "the text to tokenize",
                                                     kMaxInputBytes);
  if (decode) {
    write_stdout(tokenizer->decode(ids_from_json(input, source),
                                   parser.get_bool("skip-special-tokens")));
  } else {
    std::vector<uint32_t> ids;
    try {
      ids = tokenizer->encode(input, parser.get_bool("add-special-tokens"));
    } catch (const ConfigError& e) {
      throw ConfigError("zero tokenize: " + source + ": " + e.what());
    }
    write_stdout(ids_as_json(ids));
  }
  return 0;
}

}  // namespace zero::tools
