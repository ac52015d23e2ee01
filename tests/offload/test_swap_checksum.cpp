// offload::swap_checksum: the same bytes give the same sum for any thread count; a changed bit,
// a moved word or a different length gives another.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "offload/swap_checksum.h"

namespace zero::offload {
namespace {

std::vector<uint64_t> words(size_t n) {
  std::vector<uint64_t> v(n);
  uint64_t x = 88172645463325252ULL;
  for (auto& w : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w = x;
  }
  return v;
}

TEST(SwapChecksum, IndependentOfThreadCount) {
  const auto data = words((3 << 20) / 8 + 123);  // three 1 MiB chunks and a partial one
  const int64_t bytes = static_cast<int64_t>(data.size() * 8);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const uint64_t one = swap_checksum(data.data(), bytes);
  omp_set_num_threads(4);
  const uint64_t four = swap_checksum(data.data(), bytes);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, four);
}

TEST(SwapChecksum, DetectsFlipsSwapsAndLength) {
  auto data = words(300000);
  const int64_t bytes = static_cast<int64_t>(data.size() * 8);
  const uint64_t base = swap_checksum(data.data(), bytes);
  for (size_t at : {size_t{0}, size_t{5}, size_t{131072}, data.size() - 1}) {
    for (int bit : {0, 17, 63}) {
      data[at] ^= uint64_t{1} << bit;
      EXPECT_NE(swap_checksum(data.data(), bytes), base) << "word " << at << " bit " << bit;
      data[at] ^= uint64_t{1} << bit;
    }
  }
  std::swap(data[10], data[11]);
  EXPECT_NE(swap_checksum(data.data(), bytes), base) << "words trading places";
  std::swap(data[10], data[11]);
  EXPECT_EQ(swap_checksum(data.data(), bytes), base);
  EXPECT_NE(swap_checksum(data.data(), bytes - 8), base);
  std::vector<uint64_t> zeros(4096, 0);
  EXPECT_NE(swap_checksum(zeros.data(), 8 * 4096), swap_checksum(zeros.data(), 8 * 4095)) << "zeros of other lengths";
  EXPECT_THROW(swap_checksum(data.data(), 12), InternalError);
}

}  // namespace
}  // namespace zero::offload
