#include "tools/arg_parser.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace zero::tools {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

ArgParser::ArgParser(std::string command, std::vector<std::string> args)
    : command_(std::move(command)), args_(std::move(args)) {}

ArgParser& ArgParser::option(const std::string& name, const std::string& default_value,
                             const std::string& help) {
  options_[name] = Option{default_value, help};
  order_.push_back(name);
  return *this;
}

bool ArgParser::parse() {
  for (size_t i = 0; i < args_.size(); ++i) {
    const std::string& arg = args_[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      throw ConfigError("zero " + command_ + ": unexpected argument \"" + arg + "\"\n" + usage());
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (!options_.count(name)) {
      std::string closest;
      size_t best = SIZE_MAX;
      for (const auto& known : order_) {
        const size_t d = edit_distance(name, known);
        if (d < best) best = d, closest = known;
      }
      throw ConfigError("zero " + command_ + ": unknown flag --" + name +
                        (closest.empty() ? "" : " (did you mean --" + closest + "?)"));
    }
    if (!has_value) {
      if (i + 1 >= args_.size()) {
        throw ConfigError("zero " + command_ + ": flag --" + name + " needs a value");
      }
      value = args_[++i];
    }
    values_[name] = value;
  }
  return true;
}

std::string ArgParser::get(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() ? it->second : options_.at(name).default_value;
}

int64_t ArgParser::get_int(const std::string& name) const {
  const std::string text = get(name);
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw ConfigError("zero " + command_ + ": --" + name + " must be an integer, got \"" + text + "\"");
}

std::string ArgParser::usage() const {
  std::string out = "usage: zero " + command_ + " [flags]\n";
  for (const auto& name : order_) {
    const Option& o = options_.at(name);
    out += "  --" + name + " (default: " + (o.default_value.empty() ? "none" : o.default_value) +
           ")\n      " + o.help + "\n";
  }
  return out;
}

}  // namespace zero::tools
