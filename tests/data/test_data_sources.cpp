// Data: the Markov source's exact entropy rate, token shards (round trip and every bad header),
// and the distributed sampler (rank-disjoint, deterministic, resumable).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "data/distributed_sampler.h"
#include "data/markov_source.h"
#include "data/token_shard.h"

namespace zero::data {
namespace {
namespace fs = std::filesystem;

TEST(MarkovSource, EmpiricalCrossEntropyConvergesToTheExactRate) {
  MarkovSource source(16, 2, 3, 7);
  const double rate = source.entropy_rate();
  EXPECT_GT(rate, 0.3);
  EXPECT_LT(rate, std::log(16.0));
  // -1/n log p(x_1..x_n | x_0) over one long stationary sample.
  const std::vector<int32_t> tokens = source.sample(0, 400001);
  double nll = 0.0;
  int64_t context = tokens[0] * 16 + tokens[1];
  for (size_t i = 2; i < tokens.size(); ++i) {
    nll -= std::log(source.transition(context)[tokens[i]]);
    context = (context * 16 + tokens[i]) % 256;
  }
  // Standard error of the mean of ~4e5 terms with O(1) variance: ~2e-3; 1% is several sigmas.
  EXPECT_NEAR(nll / static_cast<double>(tokens.size() - 2), rate, 0.01 * rate);
  EXPECT_EQ(source.sample(5, 20), MarkovSource(16, 2, 3, 7).sample(5, 20));
  EXPECT_NE(source.sample(5, 20), source.sample(6, 20));
}

class Shards : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_data_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) { return (dir_ / name).string(); }
  void write_raw(const std::string& p, std::vector<int32_t> header, size_t payload) {
    header.resize(256, 0);
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out << std::string(payload, '\0');
  }
  template <typename Fn>
  void expect_error(Fn&& fn, const std::string& p, const char* part) {
    try {
      fn();
      FAIL() << "expected FileError";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  fs::path dir_;
};

TEST_F(Shards, RoundTripNarrowAndWide) {
  write_token_shard(path("a.bin"), {1, 2, 65535, 7});
  TokenShard a = TokenShard::open(path("a.bin"), 70000);
  EXPECT_EQ(a.size(), 4);
  EXPECT_EQ(a.token(2), 65535u);
  EXPECT_EQ(fs::file_size(path("a.bin")), 1024u + 8u);
  write_token_shard(path("b.bin"), {1, 100000});
  EXPECT_EQ(TokenShard::open(path("b.bin"), 200000).token(1), 100000u);
  EXPECT_EQ(fs::file_size(path("b.bin")), 1024u + 8u);
}

TEST_F(Shards, BadHeadersAndTokensAreNamed) {
  const std::string p = path("x.bin");
  write_raw(p, {123, 1, 4}, 8);
  expect_error([&] { TokenShard::open(p, 100); }, p, "bad magic 123");
  write_raw(p, {kShardMagicU16, 2, 4}, 8);
  expect_error([&] { TokenShard::open(p, 100); }, p, "version 2");
  write_raw(p, {kShardMagicU16, 1, 10}, 8);
  expect_error([&] { TokenShard::open(p, 100); }, p, "truncated");
  write_raw(p, {kShardMagicU16, 1, 2}, 8);
  expect_error([&] { TokenShard::open(p, 100); }, p, "trailing data");
  std::ofstream(p, std::ios::binary) << "short";
  expect_error([&] { TokenShard::open(p, 100); }, p, "shorter than the 1024-byte");
  write_token_shard(p, {1, 2, 300, 4});
  expect_error([&] { TokenShard::open(p, 256); }, p, "token 300 at position 2");
  expect_error([&] { TokenShard::open(path("missing.bin"), 256); }, path("missing.bin"), "cannot open");
}

TEST(Sampler, RankDisjointDeterministicAndResumable) {
  const int64_t n = 103;
  std::set<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler s(n, rank, 4, 9);
    EXPECT_EQ(s.samples_per_rank(), 25);
    for (int i = 0; i < 25; ++i) EXPECT_TRUE(seen.insert(s.next()).second) << "ranks overlap";
  }
  EXPECT_EQ(seen.size(), 100u);
  DistributedSampler a(n, 1, 2, 9), b(n, 1, 2, 9);
  std::vector<int64_t> first_epoch, second_epoch;
  for (int i = 0; i < 51; ++i) first_epoch.push_back(a.next());
  for (int i = 0; i < 51; ++i) second_epoch.push_back(a.next());
  EXPECT_NE(first_epoch, second_epoch) << "each epoch is reshuffled";
  EXPECT_EQ(a.epoch(), 1);
  for (int i = 0; i < 30; ++i) b.next();
  DistributedSampler c(n, 1, 2, 9);
  c.restore(b.state());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c.next(), b.next());
  EXPECT_THROW(DistributedSampler(3, 0, 4, 1), ConfigError);
}

}  // namespace
}  // namespace zero::data
