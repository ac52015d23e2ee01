// The data sampler's restored state at the edge: an epoch of 2^63 - 1 (which would overflow the
// next epoch) or 2^64, and positions stored as unsigned or float JSON numbers, are FileErrors,
// never wrapped values; messages stay short however large the state is.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "data/distributed_sampler.h"

namespace zero::data {
namespace {

using nlohmann::json;

TEST(SamplerLimits, EpochAndPositionAtTheInt64EdgeAreRefused) {
  DistributedSampler sampler(40, 0, 2, 7);
  const json good = sampler.state();
  const json bad_values[] = {json(std::numeric_limits<int64_t>::max()),
                             json(std::numeric_limits<uint64_t>::max()),
                             json::parse("18446744073709551616"), json(kMaxSamplerEpoch + 1), json(2.0)};
  for (const char* key : {"epoch", "position"}) {
    for (const json& value : bad_values) {
      json state = good;
      state[key] = value;
      EXPECT_THROW(sampler.restore(state), FileError) << key << " = " << value;
    }
  }
  json state = good;
  state["epoch"] = kMaxSamplerEpoch;
  EXPECT_NO_THROW(sampler.restore(state));
  EXPECT_EQ(sampler.epoch(), kMaxSamplerEpoch);
}

TEST(SamplerLimits, MessagesAboutAHugeStateStayShort) {
  DistributedSampler sampler(40, 0, 2, 7);
  json state = sampler.state();
  state["epoch"] = "x";
  state["padding"] = std::string(1 << 20, 'p');
  try {
    sampler.restore(state);
    FAIL();
  } catch (const FileError& e) {
    EXPECT_LT(std::string(e.what()).size(), 1000u);
  }
}

}  // namespace
}  // namespace zero::data
