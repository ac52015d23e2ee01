// A small flag parser for the `zero` subcommands: --name VALUE and --name=VALUE, with clear
// errors for unknown flags (naming the closest known one) and bad values. Numbers are parsed
// strictly (core/parse_number.h): the whole value must be the number, integers must fit int64
// and doubles must be finite, so "0.1abc", "1e400" and "9223372036854775808" are errors that
// name the flag, never a silent truncation or a library exception.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zero::tools {

class ArgParser {
 public:
  ArgParser(std::string command, std::vector<std::string> args);

  // The first line of usage() after "usage: ", for commands with positional arguments
  // (default: "zero <command> [flags]"), and lines printed after the flags.
  ArgParser& synopsis(std::string line, std::string notes = "");
  // Declares a flag taking a value, with its default and help text.
  ArgParser& option(const std::string& name, const std::string& default_value,
                    const std::string& help);
  // Parses; throws ConfigError for unknown flags or missing values. Returns false when --help
  // or -h was given (usage has been printed to stdout).
  bool parse();

  std::string get(const std::string& name) const;
  // The flag's value as a number or boolean; each throws ConfigError
  // "zero <command>: --<name> must be ..., got "<value>"".
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;  // finite values only
  bool get_bool(const std::string& name) const;      // true/false, 1/0, yes/no
  std::string usage() const;

  // Whether `arg` asks for help (--help or -h): commands that sort their own arguments check it.
  static bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }
  // `text` shortened for a message: a flag or value may be megabytes long.
  static std::string shown(const std::string& text);

 private:
  [[noreturn]] void bad_value(const std::string& name, const std::string& expected) const;

  struct Option {
    std::string default_value;
    std::string help;
  };
  std::string command_;
  std::string synopsis_;
  std::string notes_;
  std::vector<std::string> args_;
  std::map<std::string, Option> options_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
};

}  // namespace zero::tools
