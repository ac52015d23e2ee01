// A small flag parser for the `zero` subcommands: --name VALUE and --name=VALUE, with clear
// errors for unknown flags (naming the closest known one) and bad values.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zero::tools {

class ArgParser {
 public:
  ArgParser(std::string command, std::vector<std::string> args);

  // Declares a flag taking a value, with its default and help text.
  ArgParser& option(const std::string& name, const std::string& default_value,
                    const std::string& help);
  // Parses; throws ConfigError for unknown flags or missing values. Returns false when --help
  // was given (usage has been printed).
  bool parse();

  std::string get(const std::string& name) const;
  int64_t get_int(const std::string& name) const;  // throws ConfigError naming the flag
  std::string usage() const;

 private:
  struct Option {
    std::string default_value;
    std::string help;
  };
  std::string command_;
  std::vector<std::string> args_;
  std::map<std::string, Option> options_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
};

}  // namespace zero::tools
