// run(), which several tools tests defined alike (one copy, since the folder's tests are built as
// one unit), and has().
#pragma once
#include <string>

#include "support/cli_runner.h"
#include "support/text_has.h"

namespace zero::testing {

// `zero <args>` through run_cli, with its default timeout.
inline CliResult run(const std::string& args) { return run_cli(args); }

}  // namespace zero::testing
