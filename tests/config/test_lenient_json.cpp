// Config text read as JSON: comments and trailing commas are accepted outside strings and kept
// inside them; malformed text and duplicate keys fail with source:line:column. (The HJSON
// forms have their own tests in test_hjson.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "config/lenient_json.h"
#include "core/error.h"

namespace zero::config {
namespace lenient_json_test {

std::string error_of(const std::string& text) {
  try {
    parse_lenient_json(text, "cfg.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LenientJson, StrictJsonParses) {
  const auto j = parse_lenient_json(R"({"a": 1, "b": [true, false, null], "c": {"d": "x"}})", "s");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], nlohmann::json::array({true, false, nullptr}));
  EXPECT_EQ(j["c"]["d"], "x");
}

TEST(LenientJson, LineAndBlockComments) {
  const std::string text =
      "// leading comment\n"
      "{\n"
      "  \"a\": 1, // after a value\n"
      "  /* a block\n     over lines */ \"b\": /* inline */ 2\n"
      "}\n"
      "// trailing comment";
  const auto j = parse_lenient_json(text, "s");
  EXPECT_EQ(j, nlohmann::json({{"a", 1}, {"b", 2}}));
}

TEST(LenientJson, TrailingCommasInObjectsAndArrays) {
  const auto j = parse_lenient_json("{\"a\": [1, 2, ], \"b\": {\"c\": 3, },\n}", "s");
  EXPECT_EQ(j["a"], nlohmann::json::array({1, 2}));
  EXPECT_EQ(j["b"]["c"], 3);
  const auto k = parse_lenient_json("{\"a\": [1, /* c */ ] , // x\n }", "s");
  EXPECT_EQ(k["a"], nlohmann::json::array({1}));
}

TEST(LenientJson, CommentMarkersInsideStringsAreText) {
  const auto j = parse_lenient_json(
      R"({"url": "http://host/path", "glob": "/* not a comment */", "comma": ",}", "q": "a\"//b"})",
      "s");
  EXPECT_EQ(j["url"], "http://host/path");
  EXPECT_EQ(j["glob"], "/* not a comment */");
  EXPECT_EQ(j["comma"], ",}");
  EXPECT_EQ(j["q"], "a\"//b");
}

TEST(LenientJson, EscapesAndUnicode) {
  const auto j =
      parse_lenient_json(R"({"e": "\n\t\\\/", "u": "\u00e9\ud83d\ude00", "raw": "é"})", "s");
  EXPECT_EQ(j["e"], "\n\t\\/");
  EXPECT_EQ(j["u"], "\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(j["raw"], "\xC3\xA9");
}

TEST(LenientJson, NumbersKeepIntegersAndScientificNotation) {
  const auto j = parse_lenient_json(
      R"({"i": 500000000, "e": 5e8, "f": 0.5, "n": -3, "big": 18446744073709551615})", "s");
  EXPECT_TRUE(j["i"].is_number_integer());
  EXPECT_EQ(j["i"], 500000000);
  EXPECT_TRUE(j["e"].is_number_float());
  EXPECT_EQ(j["e"].get<double>(), 5e8);
  EXPECT_EQ(j["f"].get<double>(), 0.5);
  EXPECT_EQ(j["n"], -3);
  EXPECT_TRUE(j["big"].is_number_unsigned());
}

TEST(LenientJson, ErrorsNameFileLineAndColumn) {
  EXPECT_NE(error_of("{\n  \"a\": 1\n  \"b\" 2\n}").find("cfg.json:3:7:"), std::string::npos)
      << error_of("{\n  \"a\": 1\n  \"b\" 2\n}");
  EXPECT_NE(error_of("{\"a\": }").find("cfg.json:1:7:"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": 1} x").find("cfg.json:1:10:"), std::string::npos);
  EXPECT_NE(error_of("{\n/* open").find("cfg.json:2:1: unterminated /* comment"),
            std::string::npos);
  EXPECT_NE(error_of("{\"a\": \"x").find("cfg.json:1:7: unterminated string"), std::string::npos);
  EXPECT_NE(error_of("").find("cfg.json:1:1:"), std::string::npos);
  EXPECT_NE(error_of("{'a': 1").find("cfg.json:1:1: unterminated object"), std::string::npos);
  EXPECT_NE(error_of("[1,,2]").find("cfg.json:1:4:"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": \"\\q\"}").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": \"\xFF\"}").find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": 1e999}").find("out of range"), std::string::npos);
}

TEST(LenientJson, DuplicateKeysAreErrorsNamingTheKeyPath) {
  const std::string message = error_of("{\"zero_optimization\": {\"stage\": 1,\n \"stage\": 2}}");
  EXPECT_NE(message.find("duplicate key 'zero_optimization.stage'"), std::string::npos) << message;
  EXPECT_NE(message.find("cfg.json:2:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("line 1, column 24"), std::string::npos) << message;
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_lenient_json(R"({"a": {"x": 1}, "b": {"x": 2}})", "s"));
}

TEST(LenientJson, DeepNestingIsAnErrorNotACrash) {
  const std::string text = std::string(10000, '[') + std::string(10000, ']');
  EXPECT_NE(error_of(text).find("nesting deeper"), std::string::npos);
}

}  // namespace lenient_json_test
}  // namespace zero::config
