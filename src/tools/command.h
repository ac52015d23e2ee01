// The subcommands of the `zero` program. Each takes its own arguments (argv after the
// subcommand name) and returns the process exit code; user errors are thrown as zero::Error and
// reported by main.
#pragma once
#include <string>
#include <vector>

namespace zero::tools {

using Args = std::vector<std::string>;

int run_forward_backward(const Args& args);
int run_train(const Args& args);
int run_convert(const Args& args);
int run_prepare(const Args& args);
int run_inspect(const Args& args);
int run_estimate(const Args& args);
int run_launch(const Args& args);
int run_plot(const Args& args);
int run_tokenize(const Args& args);
int run_generate(const Args& args);

}  // namespace zero::tools
