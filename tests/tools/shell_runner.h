// Scaffolding shared by the tests that run `zero` through a shell (often under mpirun): run a
// command line and capture its output and exit code, the `env ... mpirun` prefix, a scratch
// folder per test with `zero train` runs logging into it, and the per-step losses of a
// --log-json file. Unlike run_cli (support/cli_runner.h) these run the command line exactly as
// given: no `timeout`, no implied program, so a test states its whole command (the
// environment, mpirun, `zero`).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace zero::testing {

// What happens to the command's stderr: into the captured output, thrown away, or left on the
// test's own stderr (where ctest shows it) so that the output holds stdout alone.
enum class Stderr { kMerge, kDiscard, kKeep };

// Runs `command_line` with /bin/sh; the result holds its stdout (and its stderr with kMerge,
// interleaved as written) and its exit code (-1: it did not exit normally). `seconds` is left 0.
inline CliResult run_shell(const std::string& command_line, Stderr err = Stderr::kMerge) {
  const char* redirect = err == Stderr::kMerge     ? " 2>&1"
                         : err == Stderr::kDiscard ? " 2>/dev/null"
                                                   : "";
  const std::string command = command_line + redirect;
  CliResult result;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 1 << 16> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// `zero` (ZERO_CLI_PATH) followed by a space, ready for its arguments.
inline std::string zero_cli() { return std::string(ZERO_CLI_PATH) + " "; }

// The prefix that runs `zero` on `ranks` processes: "env <vars> <env> mpirun --oversubscribe
// -np N <zero> ", ready for its arguments. The variables let OpenMPI run as root (containers),
// give each rank one OpenMP thread, and turn ASan's leak check off (OpenMPI's components leak at
// MPI_Finalize; tests/CMakeLists.txt says the same for the mpi tests). `env` adds variables
// (e.g. a fault to inject), "VAR=value ..." or empty.
inline std::string mpirun(int ranks, const std::string& env = "") {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
         "ASAN_OPTIONS=detect_leaks=0 " +
         (env.empty() ? "" : env + " ") + "mpirun --oversubscribe -np " + std::to_string(ranks) + " " +
         zero_cli();
}

// Calls `take(record)` for each record (line) of a --log-json file that carries "loss": one per
// training step.
template <typename Take>
void for_each_logged_loss(const std::filesystem::path& log, Take&& take) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) take(j);
  }
}

// The per-step training losses of a --log-json file, in the order logged.
inline std::vector<double> logged_losses(const std::filesystem::path& log) {
  std::vector<double> out;
  for_each_logged_loss(log, [&](const nlohmann::json& j) { out.push_back(j["loss"].get<double>()); });
  return out;
}

// The same as (step, loss) pairs.
inline std::vector<std::pair<int64_t, double>> logged_step_losses(const std::filesystem::path& log) {
  std::vector<std::pair<int64_t, double>> out;
  for_each_logged_loss(log, [&](const nlohmann::json& j) {
    out.emplace_back(j["step"].get<int64_t>(), j["loss"].get<double>());
  });
  return out;
}

// A fresh folder per test, <temp>/<prefix><pid>_<test name>, removed after the test. Derived
// fixtures pass their prefix to the constructor.
class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Writes `content` (bytes as they are) to NAME in the folder; returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  }

  // Writes `config` to NAME.json and runs `<launcher>train <flags> --deepspeed NAME.json
  // --log-json NAME.jsonl`; `launcher` is zero_cli(), mpirun(N) or another prefix ending in a space.
  CliResult train_logged(const std::string& launcher, const std::string& name, const std::string& config,
                         const std::string& flags) const {
    const std::string config_path = write(name + ".json", config);
    return run_shell(launcher + "train " + flags + " --deepspeed " + config_path + " --log-json " +
                     log_path(name).string());
  }
  std::filesystem::path log_path(const std::string& name) const { return dir_ / (name + ".jsonl"); }
  std::vector<double> losses(const std::string& name) const { return logged_losses(log_path(name)); }

  // Runs GOT and WANT both logged `steps` losses, each of GOT's within 1e-5 of WANT's, relative
  // (f32 runs whose sums are associated differently).
  void expect_same_losses(const std::string& got_name, const std::string& want_name, size_t steps) const {
    const std::vector<double> got = losses(got_name), want = losses(want_name);
    ASSERT_EQ(got.size(), steps);
    ASSERT_EQ(want.size(), steps);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE(std::abs(got[i] - want[i]), 1e-5 * std::abs(want[i]))
          << "step " << i + 1 << ": " << got[i] << " vs " << want[i];
    }
  }

  std::string prefix_;
  std::filesystem::path dir_;
};

}  // namespace zero::testing
