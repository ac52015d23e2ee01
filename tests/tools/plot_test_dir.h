// A scratch folder per `zero plot` test (tools/shell_runner.h's ScratchDirTest, which also
// writes files into it), with helpers to read results and run `zero` (tests/support/cli_runner.h)
// with paths quoted for the shell.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace zero::testing {

class PlotTestDir : public ScratchDirTest {
 protected:
  PlotTestDir() : ScratchDirTest("zero_plot_") {}

  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // `text` in single quotes for the shell.
  static std::string quoted(const std::string& text) {
    std::string out = "'";
    for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }

  static CliResult zero(const std::string& args) { return run_cli(args, 120); }
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace zero::testing
