// Stage boundaries against DeepSpeed's partition methods. Expected values are DeepSpeed's own
// unit-test expectations (tests/unit/runtime/utils/test_partition.py) where it has them, else
// worked by hand through its algorithms (the steps are in the comments).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/stage_partition.h"

namespace zero::pipeline {
namespace stage_partition_test {

using Parts = std::vector<int64_t>;

TEST(PartitionUniform, DividingCounts) {
  EXPECT_EQ(partition_uniform(8, 4), (Parts{0, 2, 4, 6, 8}));
  EXPECT_EQ(partition_uniform(4, 4), (Parts{0, 1, 2, 3, 4}));
  EXPECT_EQ(partition_uniform(10, 1), (Parts{0, 10}));
}

TEST(PartitionUniform, NonDividingCountsPutTheExtraItemsFirst) {
  // chunk = n / p, the first n - chunk * p parts take one more.
  EXPECT_EQ(partition_uniform(10, 4), (Parts{0, 3, 6, 8, 10}));
  EXPECT_EQ(partition_uniform(7, 3), (Parts{0, 3, 5, 7}));
  EXPECT_EQ(partition_uniform(6, 4), (Parts{0, 2, 4, 5, 6}));
}

TEST(PartitionUniform, FewerItemsThanParts) {
  EXPECT_EQ(partition_uniform(2, 4), (Parts{0, 1, 2, 2, 2}));
  EXPECT_EQ(partition_uniform(0, 2), (Parts{0, 0, 0}));
}

TEST(PartitionBalanced, DeepSpeedsOwnExpectations) {
  EXPECT_EQ(partition_balanced({1, 1, 1, 1, 1, 1, 1, 1}, 4), (Parts{0, 2, 4, 6, 8}));
  EXPECT_EQ(partition_balanced({0, 1, 2, 3, 3, 3}, 4), (Parts{0, 3, 4, 5, 6}));
  EXPECT_EQ(partition_balanced({0.0, 1.1, 1.9, 3.0, 3.0, 3.0}, 4), (Parts{0, 3, 4, 5, 6}));
  EXPECT_EQ(partition_balanced({0.0, 1.1, 30.0, 3.0}, 3), (Parts{0, 2, 3, 4}));
  EXPECT_EQ(partition_balanced({1, 1}, 4), (Parts{0, 1, 2, 2, 2}));  // n <= parts: uniform
  EXPECT_EQ(partition_balanced(std::vector<double>(10, 1.0), 1), (Parts{0, 10}));
}

TEST(PartitionBalanced, HandWorkedCases) {
  // [0, 1.1, 1.9, 3, 30] in 2: the last run starting at k = 1, 2, 3, 4 costs
  // (36 - 0), (34.9 - 1.1), (33 - 3), (30 - 6) = 24: the heavy last item alone.
  EXPECT_EQ(partition_balanced({0.0, 1.1, 1.9, 3.0, 30.0}, 2), (Parts{0, 4, 5}));
  // [1, 1, 1] in 2: cuts at 1 and at 2 both cost 2 - 1 = 1; the later cut wins the tie.
  EXPECT_EQ(partition_balanced({1, 1, 1}, 2), (Parts{0, 2, 3}));
  // A GPT-like unit list: embedding 10, four blocks of 4, tied head 0. Two stages: cutting
  // after unit 2 gives runs 14 | 12 (cost 2), the least. Three stages: best 2-run splits
  // are [10 | 4] (cost 6), [10 | 8] (2), [10 | 12] (2), [14 | 12] (2) for the first 2..5 units;
  // adding the last run from k = 2..5 costs 8, 2, 8, 14: runs 10 | 8 | 8.
  EXPECT_EQ(partition_balanced({10, 4, 4, 4, 4, 0}, 2), (Parts{0, 2, 6}));
  EXPECT_EQ(partition_balanced({10, 4, 4, 4, 4, 0}, 3), (Parts{0, 1, 3, 6}));
}

TEST(PartitionBalanced, RunsAreNeverEmptyWhenThereAreEnoughItems) {
  const std::vector<double> weights = {5, 0, 0, 0, 0, 0, 0, 9};
  for (int64_t parts = 1; parts <= 8; ++parts) {
    const Parts p = partition_balanced(weights, parts);
    ASSERT_EQ(static_cast<int64_t>(p.size()), parts + 1);
    EXPECT_EQ(p.front(), 0);
    EXPECT_EQ(p.back(), 8);
    for (int64_t s = 0; s < parts; ++s) EXPECT_LT(p[s], p[s + 1]) << parts << " parts";
  }
}

std::vector<LayerInfo> gpt_like() {
  return {{"embed", "embedding", 10},        {"layers.0", "transformer_block", 4},
          {"layers.1", "transformer_block", 4}, {"layers.2", "transformer_block", 4},
          {"layers.3", "transformer_block", 4}, {"head", "lm_head", 0}};
}

Parts split(int64_t stages, const std::string& method) {
  return partition_layers(gpt_like(), stages, PartitionMethod::parse(method));
}

TEST(PartitionLayers, Methods) {
  EXPECT_EQ(split(2, "parameters"), (Parts{0, 2, 6}));
  EXPECT_EQ(split(2, "best"), (Parts{0, 2, 6}));  // DeepSpeed's config default
  EXPECT_EQ(split(4, "uniform"), (Parts{0, 2, 4, 5, 6}));
  // Weights 0 1 1 1 1 0: the last run starting at k = 1..5 costs 4, 2, 0, 2, 4.
  EXPECT_EQ(split(2, "type:transformer"), (Parts{0, 3, 6}));
  EXPECT_EQ(split(2, "Type:TRANSFORMER"), (Parts{0, 3, 6}));
  EXPECT_EQ(split(2, "type:^transformer_block$"), (Parts{0, 3, 6}));
  EXPECT_EQ(split(2, "type:block:ignored"), (Parts{0, 3, 6}));  // DeepSpeed's split(':')[1]
  EXPECT_EQ(split(6, "parameters"), (Parts{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(split(1, "uniform"), (Parts{0, 6}));
}

TEST(PartitionLayers, MethodNamesRoundTrip) {
  EXPECT_EQ(PartitionMethod::parse("Parameters").to_string(), "parameters");
  EXPECT_EQ(PartitionMethod::parse("UNIFORM").to_string(), "uniform");
  EXPECT_EQ(PartitionMethod::parse("type:Embed").to_string(), "type:embed");
}

std::string error_of(int64_t stages, const std::string& method) {
  try {
    split(stages, method);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in: " << text;
}

TEST(PartitionLayers, BadInputIsAConfigErrorNamingTheKeyAndTheFix) {
  const std::string too_many = error_of(7, "parameters");
  expect_has(too_many, "'pipeline.stages'");
  expect_has(too_many, "only 6 units");
  expect_has(too_many, "at most 6 stages");
  expect_has(error_of(0, "uniform"), "'pipeline.stages' = 0");

  const std::string unknown = error_of(2, "paramters");
  expect_has(unknown, "'pipeline.partition' = \"paramters\" is not a partition method");
  expect_has(unknown, "\"parameters\" (the default), \"uniform\" or \"type:REGEX\"");
  expect_has(error_of(2, "profile"), "does not implement");

  const std::string nothing = error_of(2, "type:attention");
  expect_has(nothing, "matches no unit");
  expect_has(nothing, "embedding, transformer_block, lm_head");

  expect_has(error_of(2, "type:("), "does not compile");
  expect_has(error_of(2, "type:" + std::string(201, 'a')), "more than the 200 allowed");
  expect_has(error_of(2, "type:"), "regex is empty");
  try {
    PartitionMethod::parse("bogus", "--pipeline-partition");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    expect_has(e.what(), "'--pipeline-partition'");
  }
}

TEST(PartitionLayers, StageOwner) {
  const Parts parts = {0, 2, 6};
  EXPECT_EQ(stage_owner(parts, 0), 0);
  EXPECT_EQ(stage_owner(parts, 1), 0);
  EXPECT_EQ(stage_owner(parts, 2), 1);
  EXPECT_EQ(stage_owner(parts, 5), 1);
  EXPECT_THROW(stage_owner(parts, 6), InternalError);
}

TEST(PartitionLayers, TiedUnitsSpanTheStagesThatHoldThem) {
  // Embedding (unit 0) and tied head (unit 5) of the GPT-like list.
  EXPECT_EQ(stages_holding({0, 2, 6}, {0, 5}), (Parts{0, 1}));
  EXPECT_EQ(stages_holding({0, 1, 3, 6}, {5, 0}), (Parts{0, 2}));
  EXPECT_EQ(stages_holding({0, 6}, {0, 5}), (Parts{0}));  // one stage: no reduction
}

}  // namespace stage_partition_test
}  // namespace zero::pipeline
