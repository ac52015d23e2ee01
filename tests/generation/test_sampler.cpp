// Sampler (generation/sampler.h): greedy argmax with torch's tie rule, Hugging Face's repetition
// penalty, top-k, top-p and temperature (checked through the support and the frequencies of many
// draws), independent per-sequence streams, and the errors for bad settings and bad logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/error.h"
#include "generation/sampler.h"

namespace zero::generation {
namespace test_sampler {

constexpr double kInf = std::numeric_limits<double>::infinity();

SamplingOptions sampling(double temperature = 1.0, int64_t top_k = 0, double top_p = 1.0) {
  SamplingOptions o;
  o.greedy = false;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = 42;
  return o;
}

// Logits whose softmax is `probs`.
std::vector<double> logits_of(const std::vector<double>& probs) {
  std::vector<double> out;
  for (double p : probs) out.push_back(p > 0 ? std::log(p) : -kInf);
  return out;
}

// Frequencies of `draws` tokens drawn from `logits`.
std::vector<double> frequencies(const SamplingOptions& options, const std::vector<double>& logits,
                                int draws) {
  Sampler sampler(options, 1);
  std::vector<double> counts(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) counts[static_cast<size_t>(sampler.next(0, logits, {}))] += 1.0;
  for (double& c : counts) c /= draws;
  return counts;
}

std::set<int64_t> support(const SamplingOptions& options, const std::vector<double>& logits) {
  Sampler sampler(options, 1);
  std::set<int64_t> seen;
  for (int i = 0; i < 3000; ++i) seen.insert(sampler.next(0, logits, {}));
  return seen;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnATie) {
  Sampler greedy(SamplingOptions{}, 1);
  EXPECT_EQ(greedy.next(0, std::vector<double>{0.1, 3.0, -1.0, 2.9}, {}), 1);
  EXPECT_EQ(greedy.next(0, std::vector<double>{1.0, 5.0, 5.0, -kInf}, {}), 1);
  EXPECT_EQ(greedy.next(0, std::vector<double>{-kInf, -kInf, -3.0}, {}), 2);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  SamplingOptions o;
  o.repetition_penalty = 1.3;
  Sampler greedy(o, 1);
  const std::vector<int64_t> history{0, 0, 5};  // 5 is outside this vocabulary: ignored
  // 2.0 / 1.3 = 1.54 < 1.9: token 1 wins once token 0 was seen.
  EXPECT_EQ(greedy.next(0, std::vector<double>{2.0, 1.9}, history), 1);
  EXPECT_EQ(greedy.next(0, std::vector<double>{2.0, 1.9}, std::vector<int64_t>{1}), 0);
  // -1.0 * 1.3 = -1.3 < -1.2: a negative logit of a seen token drops further.
  EXPECT_EQ(greedy.next(0, std::vector<double>{-1.0, -1.2}, history), 1);
}

TEST(Sampler, TopKOfOneIsGreedyAndTopKLimitsTheSupport) {
  const std::vector<double> logits{0.5, 2.0, 1.5, -0.5, 1.9};
  EXPECT_EQ(support(sampling(1.0, 1), logits), (std::set<int64_t>{1}));
  EXPECT_EQ(support(sampling(1.0, 3), logits), (std::set<int64_t>{1, 2, 4}));
  EXPECT_EQ(support(sampling(1.0, 0), logits).size(), 5u);
}

TEST(Sampler, TopPKeepsTheFewestTokensReachingTheMass) {
  const std::vector<double> logits = logits_of({0.2, 0.5, 0.3});
  EXPECT_EQ(support(sampling(1.0, 0, 0.49), logits), (std::set<int64_t>{1}));
  EXPECT_EQ(support(sampling(1.0, 0, 0.51), logits), (std::set<int64_t>{1, 2}));
  EXPECT_EQ(support(sampling(1.0, 0, 0.79), logits), (std::set<int64_t>{1, 2}));
  EXPECT_EQ(support(sampling(1.0, 0, 0.81), logits), (std::set<int64_t>{0, 1, 2}));
}

// 40000 draws: a frequency's standard deviation is <= 0.0025, so 0.015 is 6 of them.
TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  const std::vector<double> probs{0.5, 0.3, 0.2};
  const std::vector<double> plain = frequencies(sampling(1.0), logits_of(probs), 40000);
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(plain[i], probs[i], 0.015) << i;
  // Temperature 0.5 squares the probabilities: 0.25, 0.09, 0.04 over 0.38.
  const std::vector<double> sharp = frequencies(sampling(0.5), logits_of(probs), 40000);
  const double expected[] = {0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38};
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(sharp[i], expected[i], 0.015) << i;
  // top-k 2 renormalises over the two most likely: 0.5 / 0.8 and 0.3 / 0.8.
  const std::vector<double> top2 = frequencies(sampling(1.0, 2), logits_of(probs), 40000);
  EXPECT_NEAR(top2[0], 0.625, 0.015);
  EXPECT_NEAR(top2[1], 0.375, 0.015);
  EXPECT_EQ(top2[2], 0.0);
}

// Without top-k or top-p the draw walks the vocabulary in its own order (no sort): logits out of
// order still give their softmax, and a -inf token, first or last, is never drawn.
TEST(Sampler, UnfilteredDrawsFollowTheSoftmaxInAnyOrder) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> logits{-inf, std::log(0.2), std::log(0.5), std::log(0.3), -inf};
  const std::vector<double> got = frequencies(sampling(1.0), logits, 40000);
  const double expected[] = {0.0, 0.2, 0.5, 0.3, 0.0};
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(got[i], expected[i], 0.015) << i;
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[4], 0.0);
}

TEST(Sampler, EachSequenceHasItsOwnStream) {
  const std::vector<double> logits(50, 0.0);  // uniform: every draw shows the stream
  Sampler alone(sampling(), 1);
  Sampler three(sampling(), 3);
  std::vector<int64_t> a, b, c;
  for (int i = 0; i < 40; ++i) {
    a.push_back(alone.next(0, logits, {}));
    b.push_back(three.next(0, logits, {}));
    c.push_back(three.next(1, logits, {}));
  }
  EXPECT_EQ(a, b);  // sequence 0's tokens do not depend on the others beside it
  EXPECT_NE(b, c);
  SamplingOptions other = sampling();
  other.seed = 43;
  Sampler reseeded(other, 1);
  std::vector<int64_t> d;
  for (int i = 0; i < 40; ++i) d.push_back(reseeded.next(0, logits, {}));
  EXPECT_NE(a, d);
}

TEST(Sampler, BadSettingsAndLogitsAreErrors) {
  EXPECT_THROW(validate(sampling(0.0)), ConfigError);
  EXPECT_THROW(validate(sampling(-1.0)), ConfigError);
  EXPECT_THROW(validate(sampling(kInf)), ConfigError);
  EXPECT_THROW(validate(sampling(1.0, -1)), ConfigError);
  EXPECT_THROW(validate(sampling(1.0, 0, 0.0)), ConfigError);
  EXPECT_THROW(validate(sampling(1.0, 0, 1.01)), ConfigError);
  SamplingOptions penalty = sampling();
  penalty.repetition_penalty = 0.0;
  EXPECT_THROW(Sampler(penalty, 1), ConfigError);
  try {
    validate(sampling(1.0, 0, 2.0));
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--top-p must lie in (0, 1]"), std::string::npos);
  }
  Sampler sampler(sampling(), 1);
  Sampler greedy(SamplingOptions{}, 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(sampler.next(0, std::vector<double>{0.0, nan}, {}), Error);
  EXPECT_THROW(greedy.next(0, std::vector<double>{kInf, 0.0}, {}), Error);
  EXPECT_THROW(sampler.next(0, std::vector<double>{-kInf, -kInf}, {}), Error);
  EXPECT_THROW(greedy.next(0, std::vector<double>{-kInf, -kInf}, {}), Error);
}

}  // namespace test_sampler
}  // namespace zero::generation
