// The `zero` program on bad input: every command answers --help and -h, numbers on the command
// line are parsed strictly, damaged checkpoints are errors naming the file and field for inspect,
// convert and resume alike, `latest` never leads outside the checkpoint directory, counters at
// the int64 edge are refused, a failed resume changes nothing on disk, and no bad input prints
// "internal error". Each test is named after the bug it pins down.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "tools/cli_helpers.h"

namespace cli_hardening_test {
namespace fs = std::filesystem;
using nlohmann::json;

using Result = zero::testing::CliResult;

using zero::testing::has;
using zero::testing::run;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = read_file(entry.path());
  }
  return files;
}

// A user error: exit code 2 and a message, never a crash or an "internal error".
void expect_user_error(const Result& r, const std::string& args) {
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_FALSE(has(r.output, "internal error")) << args << "\n" << r.output;
  EXPECT_FALSE(has(r.output, "json.exception")) << args << "\n" << r.output;
}

constexpr const char* kTrain = "train --steps 2 --seq-len 8";

class CliHardening : public ::testing::Test {
 protected:
  // One small checkpoint for the whole suite (DIR/global_step2); each test works on a copy.
  static void SetUpTestSuite() {
    source_ = fs::temp_directory_path() / ("zero_cli_hardening_" + std::to_string(::getpid()));
    fs::remove_all(source_);
    const Result r = run(std::string(kTrain) + " --save " + (source_ / "ck").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(source_); }
  void SetUp() override {
    dir_ = source_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(source_ / "ck", dir_ / "ck", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ck() const { return (dir_ / "ck").string(); }
  fs::path state_path() const { return dir_ / "ck" / "global_step2" / "engine_state.json"; }
  void edit(const std::function<void(json&)>& change) {
    json s = json::parse(read_file(state_path()));
    change(s);
    write_file(state_path(), s.dump(1));
  }
  void edit_text(const std::string& from, const std::string& to) {
    std::string text = read_file(state_path());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    write_file(state_path(), text);
  }
  // inspect, convert and resume (saving into the same directory) all refuse the checkpoint with
  // a message containing every part of `parts`, and the directory is unchanged afterwards.
  void expect_every_reader_refuses(const std::vector<std::string>& parts) {
    const auto before = snapshot(dir_ / "ck");
    const std::string commands[] = {
        "inspect " + ck(),
        "convert " + ck() + " " + (dir_ / "hf").string(),
        std::string(kTrain) + " --steps 4 --resume " + ck() + " --save " + ck(),
    };
    for (const std::string& args : commands) {
      const Result r = run(args);
      expect_user_error(r, args);
      for (const std::string& part : parts) EXPECT_TRUE(has(r.output, part)) << args << "\n" << r.output;
      EXPECT_LT(r.seconds, 30.0) << args;
    }
    EXPECT_EQ(snapshot(dir_ / "ck"), before);
    EXPECT_FALSE(fs::exists(dir_ / "hf" / "model.safetensors"));
  }

  static fs::path source_;
  fs::path dir_;
};

fs::path CliHardening::source_;

TEST_F(CliHardening, EveryCommandAnswersHelpAndDashH) {
  for (const std::string command :
       {"inspect", "convert", "launch", "estimate", "prepare", "forward-backward", "help", "train"}) {
    for (const std::string flag : {"--help", "-h"}) {
      const Result r = run(command + " " + flag);
      EXPECT_EQ(r.exit_code, 0) << command << " " << flag << "\n" << r.output;
      EXPECT_TRUE(has(r.output, "usage: zero")) << command << " " << flag << "\n" << r.output;
    }
  }
  for (const std::string args : {"--help", "-h", "help inspect"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "usage: zero")) << args << "\n" << r.output;
  }
}

TEST_F(CliHardening, InspectHelpIsNotAPathThatDoesNotExist) {
  const Result r = run("inspect --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "does not exist")) << r.output;
  EXPECT_TRUE(has(r.output, "usage: zero inspect PATH")) << r.output;
}

TEST_F(CliHardening, LrAbcAnd1e400AndTrailingGarbageNameTheFlag) {
  for (const std::string value : {"abc", "1e400", "0.1abc", "nan"}) {
    const std::string args = std::string(kTrain) + " --lr " + value;
    const Result r = run(args);
    expect_user_error(r, args);
    EXPECT_TRUE(has(r.output, "--lr")) << args << "\n" << r.output;
    EXPECT_FALSE(has(r.output, "stod")) << args << "\n" << r.output;
  }
}

TEST_F(CliHardening, StepsAndMicroBatchAtInt64MaxAreRefused) {
  Result r = run("train --steps 9223372036854775807 --seq-len 8");
  expect_user_error(r, "--steps 2^63-1");
  EXPECT_TRUE(has(r.output, "--steps")) << r.output;
  r = run("train --steps 2 --seq-len 8 --micro-batch 9223372036854775807");
  expect_user_error(r, "--micro-batch 2^63-1");
  EXPECT_TRUE(has(r.output, "micro")) << r.output;
  r = run("train --steps 99999999999999999999");
  expect_user_error(r, "--steps 10^20");
  EXPECT_TRUE(has(r.output, "--steps")) << r.output;
}

TEST_F(CliHardening, InspectOfArchitecturesEmptyIsAnErrorNotASegfault) {
  edit([](json& s) { s["model_config"]["architectures"] = json::array(); });
  expect_every_reader_refuses({"model_config", "architectures", state_path().string()});
}

TEST_F(CliHardening, CheckpointFieldOfTheWrongTypeNamesTheFieldAndTheFile) {
  edit([](json& s) { s["global_steps"] = "2"; });
  expect_every_reader_refuses({"\"global_steps\"", state_path().string()});
}

TEST_F(CliHardening, InspectWhenLatestPointsNowhereIsACleanError) {
  write_file(dir_ / "ck" / "latest", "global_step7");
  expect_every_reader_refuses({"global_step7", "does not exist"});
  const Result r = run("inspect " + ck());
  EXPECT_FALSE(has(r.output, "parse error")) << r.output;
}

TEST_F(CliHardening, InspectDoesNotFollowALatestOutsideTheDirectory) {
  // A valid checkpoint at ../other/global_step2, which inspect used to describe.
  fs::copy(dir_ / "ck", dir_ / "other", fs::copy_options::recursive);
  write_file(dir_ / "ck" / "latest", "../other/global_step2");
  expect_every_reader_refuses({(dir_ / "ck" / "latest").string(), "not a checkpoint folder"});
}

TEST_F(CliHardening, ResumeAtGlobalStepsTwoToThe64IsRefusedNotRunAtANegativeStep) {
  edit_text("\"global_steps\": 2", "\"global_steps\": 18446744073709551616");
  expect_every_reader_refuses({"\"global_steps\"", state_path().string()});
  const Result r = run(std::string(kTrain) + " --resume " + ck());
  EXPECT_FALSE(has(r.output, "at step -")) << r.output;
}

TEST_F(CliHardening, ResumeAtGlobalSamplesInt64MaxIsRefused) {
  edit([](json& s) { s["global_samples"] = INT64_MAX; });
  expect_every_reader_refuses({"\"global_samples\"", state_path().string()});
}

TEST_F(CliHardening, ResumeAtNextSampleInt64MaxIsRefusedAndChangesNothing) {
  edit([](json& s) { s["client_state"]["data"]["next_sample"] = INT64_MAX; });
  const auto before = snapshot(dir_ / "ck");
  const std::string args = std::string(kTrain) + " --steps 4 --resume " + ck() + " --save " + ck();
  const Result r = run(args);
  expect_user_error(r, args);
  EXPECT_TRUE(has(r.output, "next_sample") && has(r.output, "client_state.data") &&
              has(r.output, state_path().string()))
      << r.output;
  EXPECT_EQ(snapshot(dir_ / "ck"), before);
}

TEST_F(CliHardening, ClientStateNested200000LevelsIsAnErrorWithinSeconds) {
  edit([](json& s) { s["client_state"] = "DEEP"; });
  edit_text("\"DEEP\"", std::string(200000, '[') + std::string(200000, ']'));
  expect_every_reader_refuses({state_path().string(), "nests deeper"});
}

TEST_F(CliHardening, MegabyteFlagNameIsAnsweredQuickly) {
  // One argument may be at most 128 KiB on Linux; the suggester must not take length^2 time.
  const std::string flag = "--" + std::string(120000, 'x');
  for (const std::string command : {"train", "estimate", "forward-backward", "convert a b", "prepare"}) {
    const Result r = run(command + " " + flag);
    expect_user_error(r, command);
    EXPECT_TRUE(has(r.output, "unknown flag")) << command << "\n" << r.output.substr(0, 500);
    EXPECT_LT(r.output.size(), 4000u) << command;
    EXPECT_LT(r.seconds, 5.0) << command;
  }
}

TEST_F(CliHardening, NoBadNumberOrPathPrintsInternalError) {
  const std::string text = (dir_ / "t.txt").string();
  write_file(text, "hello world\n");
  const struct {
    std::string args, names;
  } cases[] = {
      {"forward-backward --batch 1e3", "--batch"},
      {"forward-backward --batch 0x10", "--batch"},
      {"forward-backward --seq-len 99999999999999999999", "--seq-len"},
      {"forward-backward --seq-len 9223372036854775807", "--seq-len"},
      {"forward-backward --seed 1.5", "--seed"},
      {"estimate --params 1e400", "--params"},
      {"estimate --params 7B --stage 2 --gpu-memory 1e300", "--gpu-memory"},
      {"estimate --params 7B --stage 2 --gpus-per-node 9223372036854775807", "--gpus-per-node"},
      {"estimate --params 7B --stage 2 --buffer-factor 1.5x", "--buffer-factor"},
      {"estimate --model tiny --micro-batch 9223372036854775807 --seq-len 8", "--micro-batch"},
      {"launch -n 99999999999999999999 -- train", "-n"},
      {"launch -n 1 --hostfile /dev/zero --dry-run -- train", "/dev/zero"},
      {"launch -n 1 --hostfile " + dir_.string() + " --dry-run -- train", dir_.string()},
      {"prepare --out " + (dir_ / "o.bin").string() + " --val-out " + (dir_ / "v.bin").string() +
           " --val-fraction 0.1abc " + text,
       "--val-fraction"},
      {"train --seed abc", "--seed"},
      {"train --steps 2 --seq-len 8 --eval-every -1", "--eval-every"},
      {"train --seq-len 9223372036854775807", "--seq-len"},
      {"inspect " + (dir_ / "nothing").string(), "nothing"},
      {"inspect " + std::string(5000, 'a'), "aaaa"},
      {"inspect a b", "inspect"},
      {"convert " + ck(), "convert"},
      {"convert " + ck() + " " + (dir_ / "hf").string() + " --tag ../ck/global_step2", "checkpoint tag"},
      {"convert " + ck() + " " + (dir_ / "hf").string() + " --tag nothing", "nothing"},
      {"train --resume /dev/null", "/dev/null"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    expect_user_error(r, c.args);
    EXPECT_TRUE(has(r.output, c.names)) << c.args << "\n" << r.output.substr(0, 2000);
  }
}

}  // namespace cli_hardening_test
