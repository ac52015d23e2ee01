// HJSON as DeepSpeed reads it (hjson.load): one test per feature, and the edges where hjson's
// rules decide between a quoteless string and a value.
#include <gtest/gtest.h>

#include <string>

#include "config/lenient_json.h"
#include "core/error.h"

namespace zero::config {
namespace hjson_test {

using nlohmann::json;

json parse(const std::string& text) { return parse_lenient_json(text, "cfg.hjson"); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Hjson, RootBracesAreOptional) {
  EXPECT_EQ(parse("stage: 3\nlr: 0.5\n"), json({{"stage", 3}, {"lr", 0.5}}));
  // A file with nothing in it is a mistake, not an empty config.
  EXPECT_NE(error_of("# only a comment\n").find("the text is empty"), std::string::npos);
}

TEST(Hjson, HashSlashAndBlockComments) {
  const json j = parse(
      "# hash comment\n"
      "a: 1 # after a number\n"
      "b: 2 // after a number\n"
      "c: /* before */ 3\n");
  EXPECT_EQ(j, json({{"a", 1}, {"b", 2}, {"c", 3}}));
}

TEST(Hjson, UnquotedAndSingleQuotedKeys) {
  const json j = parse("{zero_optimization: {stage: 2}, 'with space': 1, \"q\": 2}");
  EXPECT_EQ(j["zero_optimization"]["stage"], 2);
  EXPECT_EQ(j["with space"], 1);
  EXPECT_EQ(j["q"], 2);
}

TEST(Hjson, QuotelessStringsRunToTheEndOfTheLine) {
  const json j = parse(
      "type: AdamW\n"
      "name: my run, second try   \n"
      "url: http://host/a#b // part of the string\n");
  EXPECT_EQ(j["type"], "AdamW");
  EXPECT_EQ(j["name"], "my run, second try");
  EXPECT_EQ(j["url"], "http://host/a#b // part of the string");
}

TEST(Hjson, KeywordsAndNumbersBeforeAStopAreValues) {
  const json j = parse(
      "x: {a: true, b: false, c: null, d: -1.5e3, e: 12}\n"
      "f: [1, 2, 3]\n"
      "g: 5e8 # comment\n"
      "h: true story\n"
      "i: 1.2.3\n"
      "j: auto\n");
  EXPECT_EQ(j["x"]["a"], true);
  EXPECT_EQ(j["x"]["b"], false);
  EXPECT_TRUE(j["x"]["c"].is_null());
  EXPECT_EQ(j["x"]["d"].get<double>(), -1500.0);
  EXPECT_TRUE(j["x"]["e"].is_number_integer());
  EXPECT_EQ(j["f"], json::array({1, 2, 3}));
  EXPECT_EQ(j["g"].get<double>(), 5e8);
  EXPECT_EQ(j["h"], "true story");
  EXPECT_EQ(j["i"], "1.2.3");
  EXPECT_EQ(j["j"], "auto");
}

TEST(Hjson, SingleQuotedStrings) {
  const json j = parse("a: 'it\\'s \"quoted\"'\nb: 'x\\ty'\n");
  EXPECT_EQ(j["a"], "it's \"quoted\"");
  EXPECT_EQ(j["b"], "x\ty");
}

TEST(Hjson, MultilineStringsDropTheIndent) {
  const json j = parse(
      "text:\n"
      "  '''\n"
      "  first line\n"
      "    indented\n"
      "  last line\n"
      "  '''\n"
      "one: '''single line'''\n");
  EXPECT_EQ(j["text"], "first line\n  indented\nlast line");
  EXPECT_EQ(j["one"], "single line");
  EXPECT_NE(error_of("a: '''never closed\n").find("cfg.hjson:1:4: unterminated '''"),
            std::string::npos);
}

TEST(Hjson, CommasAreOptionalAndTrailingCommasFine) {
  EXPECT_EQ(parse("{\n a: 1\n b: [\n  1\n  2\n ]\n}"),
            json({{"a", 1}, {"b", json::array({1, 2})}}));
  EXPECT_EQ(parse("{\"a\": 1, \"b\": 2,}"), json({{"a", 1}, {"b", 2}}));
}

TEST(Hjson, DuplicateKeysAreErrorsAsInDeepSpeed) {
  const std::string m = error_of("zero_optimization: {stage: 1\nstage: 2}\n");
  EXPECT_NE(m.find("duplicate key 'zero_optimization.stage'"), std::string::npos) << m;
  EXPECT_NE(m.find("cfg.hjson:2:1:"), std::string::npos) << m;
}

TEST(Hjson, KeyErrorsNameTheLine) {
  EXPECT_NE(error_of("a b: 1\n").find("cfg.hjson:1:2: a key without quotes cannot contain"),
            std::string::npos)
      << error_of("a b: 1\n");
  EXPECT_NE(error_of("a: 1\n]\n").find("cfg.hjson:2:1: found ']' where a key"),
            std::string::npos);
  EXPECT_NE(error_of("a: 1\nb\n").find("cfg.hjson:2:1: expected ':'"), std::string::npos)
      << error_of("a: 1\nb\n");
  EXPECT_NE(error_of("a: ,\n").find("cfg.hjson:1:4: expected a value"), std::string::npos);
}

TEST(Hjson, KeyLinesAreRecorded) {
  KeyLines lines;
  parse_lenient_json("# c\ntrain_batch_size: 8\nzero_optimization: {\n  stage: 2\n}\n", "s",
                     &lines);
  EXPECT_EQ(lines.at("train_batch_size"), 2u);
  EXPECT_EQ(lines.at("zero_optimization"), 3u);
  EXPECT_EQ(lines.at("zero_optimization.stage"), 4u);
}

TEST(Hjson, LongQuotelessLinesStayLinear) {
  // Many commas on one line once made every comma re-check the whole prefix.
  const std::string line = "a: x" + std::string(1 << 20, ',') + "\n";
  EXPECT_EQ(parse(line)["a"].get<std::string>().size(), (1u << 20) + 1);
}

}  // namespace hjson_test
}  // namespace zero::config
