// bounded_json.h: JSON from outside is depth-limited while parsing (no stack overflow on
// 200,000 levels), duplicate keys are refused where asked, and every failure is a FileError
// naming the file, never a library exception.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "io/io_scratch.h"

namespace zero::io {
namespace {

using testing::has;

std::string nested_arrays(int levels) {
  return std::string(static_cast<size_t>(levels), '[') + std::string(static_cast<size_t>(levels), ']');
}

std::string parse_error(std::string_view text, int max_depth = kMaxJsonDepth,
                        bool reject_duplicates = false) {
  try {
    parse_json_bounded(text, "some/file.json", "the test file", max_depth, reject_duplicates);
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(has(message, "some/file.json")) << message;
    EXPECT_TRUE(has(message, "the test file")) << message;
    return message;
  }
  ADD_FAILURE() << "expected a FileError";
  return "";
}

TEST(BoundedJson, ParsesOrdinaryJson) {
  const nlohmann::json j = parse_json_bounded(R"({"a": [1, {"b": null}], "c": "d"})", "f", "x");
  EXPECT_EQ(j["a"][1].size(), 1u);
  EXPECT_EQ(j["c"], "d");
}

TEST(BoundedJson, DepthLimitCountsTheOutermostContainerAsLevelOne) {
  EXPECT_NO_THROW(parse_json_bounded(nested_arrays(kMaxJsonDepth), "f", "x"));
  EXPECT_TRUE(has(parse_error(nested_arrays(kMaxJsonDepth + 1)), "deeper than 64 levels"));
  EXPECT_NO_THROW(parse_json_bounded("[[1]]", "f", "x", 2));
  EXPECT_NO_THROW(parse_json_bounded(R"({"a": {"b": 1}})", "f", "x", 2));
  parse_error(R"({"a": {"b": {}}})", 2);
  // Scalars do not add a level.
  EXPECT_NO_THROW(parse_json_bounded("7", "f", "x", 0));
}

TEST(BoundedJson, TwoHundredThousandLevelsAreAnErrorNotAStackOverflow) {
  const std::string deep = "{\"unused\": " + nested_arrays(200000) + ", \"n_layer\": 2}";
  EXPECT_TRUE(has(parse_error(deep), "deeper than"));
  std::string objects;
  for (int i = 0; i < 200000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(200000, '}');
  parse_error(objects);
}

TEST(BoundedJson, SyntaxErrorsNameTheByte) {
  EXPECT_TRUE(has(parse_error("{\"a\": }"), "not valid JSON (at byte"));
  EXPECT_TRUE(has(parse_error(""), "not valid JSON"));
  EXPECT_TRUE(has(parse_error("{\"a\": 1} trailing"), "not valid JSON"));
  // A number beyond double range is a library out_of_range error, still a FileError here.
  parse_error("{\"a\": 1e999}");
  parse_error("\"\\ud800\"");  // a lone surrogate
}

TEST(BoundedJson, DuplicateKeysAreRefusedOnlyWhenAsked) {
  EXPECT_EQ(parse_json_bounded(R"({"a": 1, "a": 2})", "f", "x")["a"], 2);
  EXPECT_TRUE(has(parse_error(R"({"a": 1, "a": 2})", kMaxJsonDepth, true), "\"a\" twice"));
  EXPECT_TRUE(
      has(parse_error(R"({"o": {"k": 1, "k": 2}})", kMaxJsonDepth, true), "\"k\" twice"));
  // Equal keys in different objects are fine.
  EXPECT_NO_THROW(parse_json_bounded(R"({"o": {"k": 1}, "p": {"k": 2}})", "f", "x", kMaxJsonDepth,
                                     true));
}

TEST(BoundedJson, ExcerptCutsLongValues) {
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[1, 2]")), "[1,2]");
  const std::string excerpt = json_excerpt(std::string(1000, 'x'), 20);
  EXPECT_EQ(excerpt.size(), 23u);
  EXPECT_EQ(excerpt.substr(20), "...");
}

class BoundedJsonFile : public testing::IoScratch {};

TEST_F(BoundedJsonFile, ReadJsonFileAppliesTheCapDepthAndFileChecks) {
  EXPECT_EQ(read_json_file(write("ok.json", R"({"a": 1})"), "x", kMaxConfigBytes)["a"], 1);
  const std::string deep = write("deep.json", nested_arrays(1000));
  try {
    read_json_file(deep, "the model's config.json", kMaxConfigBytes);
    FAIL() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_TRUE(has(e.what(), deep) && has(e.what(), "deeper than")) << e.what();
  }
  EXPECT_THROW(read_json_file(write("big.json", std::string(200, ' ') + "{}"), "x", 100),
               FileError);
  EXPECT_THROW(read_json_file(dir_.string(), "x", 100), FileError);
}

}  // namespace
}  // namespace zero::io
