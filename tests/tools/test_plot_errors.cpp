// `zero plot` refusing what it cannot draw: every bad log line, file or flag ends with exit
// code 2 and a message naming the file and line (or the flag) and what to do — never a crash,
// a hang, or a picture drawn from half a file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "tools/plot_test_dir.h"

namespace zero::testing {
namespace {

class PlotErrors : public PlotTestDir {
 protected:
  // Runs `zero plot LOG -o out.svg` and expects a refusal mentioning each of `parts`.
  void expect_refused(const std::string& log, std::initializer_list<std::string> parts) {
    const CliResult result = zero("plot " + quoted(log) + " -o " + quoted(path("out.svg")));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(contains(result.output, "zero: error: ")) << result.output;
    for (const std::string& part : parts)
      EXPECT_TRUE(contains(result.output, part)) << result.output;
    EXPECT_FALSE(std::filesystem::exists(path("out.svg"))) << "no picture from a bad log";
  }

  static constexpr const char* kGood = "{\"step\":1,\"loss\":5}\n";
};

TEST_F(PlotErrors, LineThatIsNotJsonNamesFileAndLine) {
  expect_refused(write("log.jsonl", std::string(kGood) + "step 2 loss 4\n" + kGood),
                 {"log.jsonl:2: a --log-json line is not valid JSON"});
}

TEST_F(PlotErrors, LineWithoutStepOrLoss) {
  expect_refused(write("a.jsonl", std::string(kGood) + "{\"loss\":4}\n"),
                 {"a.jsonl:2: the line has no \"step\"", "zero train --log-json"});
  expect_refused(write("b.jsonl", std::string(kGood) + kGood + "{\"step\":3,\"lr\":1e-3}\n"),
                 {"b.jsonl:3: the line has neither \"loss\" nor \"eval_loss\""});
}

TEST_F(PlotErrors, ValuesOfTheWrongKind) {
  expect_refused(write("a.jsonl", "{\"step\":1,\"loss\":\"low\"}\n"),
                 {"a.jsonl:1: \"loss\" is \"low\", not a number"});
  expect_refused(write("b.jsonl", "{\"step\":-1,\"loss\":2}\n"),
                 {"b.jsonl:1: \"step\" is -1, not a whole number from 0 to 2^53"});
  expect_refused(write("c.jsonl", "{\"step\":1.5,\"loss\":2}\n"), {"c.jsonl:1: \"step\" is 1.5"});
  expect_refused(write("d.jsonl", "{\"step\":1e300,\"loss\":2}\n"), {"d.jsonl:1: \"step\" is"});
  expect_refused(write("e.jsonl", "[1, 2]\n"), {"e.jsonl:1: the line is [1,2], not a JSON object"});
  expect_refused(write("f.jsonl", "{\"step\":1,\"loss\":2,\"loss\":3}\n"),
                 {"f.jsonl:1: a --log-json line has the key \"loss\" twice"});
  expect_refused(write("g.jsonl", "{\"step\":1,\"loss\":2,\"lr\":[1]}\n"),
                 {"g.jsonl:1: \"lr\" is [1]"});
}

TEST_F(PlotErrors, EmptyLogHasNoSteps) {
  expect_refused(write("empty.jsonl", ""), {"empty.jsonl: the log holds no steps"});
  expect_refused(write("blank.jsonl", "\n  \n"), {"blank.jsonl: the log holds no steps"});
}

TEST_F(PlotErrors, OnlyRegularFilesOfBoundedSize) {
  expect_refused(path("missing.jsonl"), {"missing.jsonl: cannot open the training log"});
  std::filesystem::create_directories(path("folder"));
  expect_refused(path("folder"),
                 {"folder: the training log is not a regular file (it is a directory)"});
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  expect_refused(path("fifo"), {"the training log is not a regular file (it is a FIFO"});
  // Sparse: the size is refused before a byte is read.
  const std::string huge = write("huge.jsonl", kGood);
  std::filesystem::resize_file(huge, (1ull << 30) + 1);
  expect_refused(huge, {"huge.jsonl: the training log is 1024 MiB, more than the 1024 MiB"});
}

TEST_F(PlotErrors, FlagsNamedInTheMessage) {
  const std::string log = write("log.jsonl", kGood);
  CliResult result = zero("plot " + quoted(log) + " -o " + quoted(path("curve.jpg")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.output,
                       "cannot write a \".jpg\" picture; the output must end in .png or .svg"))
      << result.output;
  result = zero("plot " + quoted(log) + " --output=" + quoted(path("curve")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.output, "the output must end in .png or .svg")) << result.output;
  result = zero("plot " + quoted(log));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.output, "zero plot needs -o FILE.png or -o FILE.svg"))
      << result.output;
  result = zero("plot -o " + quoted(path("curve.png")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.output, "zero plot needs at least one log file")) << result.output;
  result = zero("plot " + quoted(log) + " -o " + quoted(path("c.png")) + " --titel x");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.output, "unknown flag --titel (did you mean --title?)"))
      << result.output;
  result = zero("plot --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(contains(result.output, "zero plot LOG.jsonl [LOG.jsonl ...] -o FILE.png|FILE.svg"));
  result = zero("help");
  EXPECT_TRUE(contains(result.output, "  plot ")) << result.output;
}

}  // namespace
}  // namespace zero::testing
