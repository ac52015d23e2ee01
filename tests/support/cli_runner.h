// Runs the `zero` program as a user would (ZERO_CLI_PATH, defined for every test; the environment
// variable of the same name overrides it where the binaries were moved, as in the GPU machine's
// bundle), capturing stdout and stderr together, the exit code and the wall time. `timeout` bounds every run, so
// a regression that hangs fails the test instead of stalling the suite.
#pragma once
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zero::testing {

struct CliResult {
  int exit_code = -1;  // -1: the program did not exit normally
  std::string output;  // stdout and stderr, interleaved as written
  double seconds = 0.0;
};

inline CliResult run_cli(const std::string& args, int timeout_seconds = 300) {
  const auto start = std::chrono::steady_clock::now();
  const char* moved = std::getenv("ZERO_CLI_PATH");
  const std::string program = moved != nullptr && *moved != '\0' ? moved : ZERO_CLI_PATH;
  const std::string command =
      "timeout " + std::to_string(timeout_seconds) + " " + program + " " + args + " 2>&1";
  CliResult result;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace zero::testing
