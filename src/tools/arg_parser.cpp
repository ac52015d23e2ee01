#include "tools/arg_parser.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/parse_number.h"

namespace zero::tools {
namespace {

// Flag names longer than this get no "did you mean" suggestion: the edit distance costs
// length x length, and no flag is anywhere near this long.
constexpr size_t kMaxSuggestedLength = 64;
constexpr size_t kMaxShownChars = 80;

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

std::string ArgParser::shown(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, kMaxShownChars)) {
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  if (text.size() > kMaxShownChars) {
    out += "... (" + std::to_string(text.size()) + " characters)";
  }
  return out;
}

ArgParser::ArgParser(std::string command, std::vector<std::string> args)
    : command_(std::move(command)), args_(std::move(args)) {}

ArgParser& ArgParser::synopsis(std::string line, std::string notes) {
  synopsis_ = std::move(line);
  notes_ = std::move(notes);
  return *this;
}

ArgParser& ArgParser::option(const std::string& name, const std::string& default_value,
                             const std::string& help) {
  options_[name] = Option{default_value, help};
  order_.push_back(name);
  return *this;
}

bool ArgParser::parse() {
  for (size_t i = 0; i < args_.size(); ++i) {
    const std::string& arg = args_[i];
    if (is_help(arg)) {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      throw ConfigError("zero " + command_ + ": unexpected argument \"" + shown(arg) + "\"\n" +
                        usage());
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
      if (name.size() <= kMaxSuggestedLength) {
        size_t best = SIZE_MAX;
        for (const auto& known : order_) {
          const size_t d = edit_distance(name, known);
          if (d < best) best = d, closest = known;
        }
      }
      throw ConfigError("zero " + command_ + ": unknown flag --" + shown(name) +
                        (closest.empty() ? "" : " (did you mean --" + closest + "?)") +
                        "; `zero " + command_ + " --help` lists the flags");
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

void ArgParser::bad_value(const std::string& name, const std::string& expected) const {
  throw ConfigError("zero " + command_ + ": --" + name + " must be " + expected + ", got \"" +
                    shown(get(name)) + "\"");
}

int64_t ArgParser::get_int(const std::string& name) const {
  const std::optional<int64_t> value = parse_int64(get(name));
  if (!value) bad_value(name, "an integer (from -2^63 to 2^63 - 1, digits only)");
  return *value;
}

double ArgParser::get_double(const std::string& name) const {
  const std::optional<double> value = parse_finite_double(get(name));
  if (!value) bad_value(name, "a finite number (e.g. 3e-4)");
  return *value;
}

bool ArgParser::get_bool(const std::string& name) const {
  const std::optional<bool> value = parse_bool(get(name));
  if (!value) bad_value(name, "true or false");
  return *value;
}

std::string ArgParser::usage() const {
  std::string out =
      "usage: " + (synopsis_.empty() ? "zero " + command_ + " [flags]" : synopsis_) + "\n";
  for (const auto& name : order_) {
    const Option& o = options_.at(name);
    out += "  --" + name + " (default: " + (o.default_value.empty() ? "none" : o.default_value) +
           ")\n      " + o.help + "\n";
  }
  out += "  -h, --help\n      print this text\n";
  return out + notes_;
}

}  // namespace zero::tools
