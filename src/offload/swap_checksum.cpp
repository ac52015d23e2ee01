// swap_checksum: multiply-rotate lanes per chunk, chunks combined in order.
#include "offload/swap_checksum.h"

#include <omp.h>

#include <bit>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace zero::offload {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr int64_t kChunkBytes = 1 << 20;

inline uint64_t lane_step(uint64_t state, uint64_t word) {
  return std::rotl(state + word * kPrime2, 31) * kPrime1;
}

uint64_t chunk_checksum(const unsigned char* data, int64_t bytes, uint64_t chunk_index) {
  uint64_t lane[4] = {kPrime1 + kPrime2, kPrime2, 0, kPrime1 ^ kPrime3};
  const int64_t words = bytes / 8;
  int64_t w = 0;
  for (; w + 4 <= words; w += 4) {
    uint64_t v[4];
    std::memcpy(v, data + w * 8, sizeof v);  // no alignment assumption
    for (int i = 0; i < 4; ++i) lane[i] = lane_step(lane[i], v[i]);
  }
  for (; w < words; ++w) {
    uint64_t v;
    std::memcpy(&v, data + w * 8, sizeof v);
    lane[0] = lane_step(lane[0], v);
  }
  uint64_t h = std::rotl(lane[0], 1) + std::rotl(lane[1], 7) + std::rotl(lane[2], 12) + std::rotl(lane[3], 18);
  h ^= static_cast<uint64_t>(bytes) * kPrime3 + chunk_index * kPrime2;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

}  // namespace

uint64_t swap_checksum(const void* data, int64_t bytes) {
  ZERO_CHECK(bytes >= 0 && bytes % 8 == 0, "swap_checksum over " << bytes << " bytes (a multiple of 8 is needed)");
  const auto* base = static_cast<const unsigned char*>(data);
  const int64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  std::vector<uint64_t> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunkBytes;
    const int64_t length = bytes - begin < kChunkBytes ? bytes - begin : kChunkBytes;
    partial[static_cast<size_t>(c)] = chunk_checksum(base + begin, length, static_cast<uint64_t>(c));
  }
  uint64_t h = kPrime3 ^ static_cast<uint64_t>(bytes);
  for (uint64_t p : partial) h = std::rotl(h ^ p, 27) * kPrime1 + kPrime2;
  return h;
}

}  // namespace zero::offload
