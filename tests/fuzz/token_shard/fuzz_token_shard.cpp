// Fuzzes the token shard reader: the input is a whole .bin file (1024-byte header, then tokens,
// then — masked layout, magic 20261125 — one loss-mask byte per token), opened with
// TokenShard::open as `zero inspect` does (any vocabulary) and as training does (the byte-level
// tiny model's 256 tokens), then read the way each uses it: every token and mask byte for
// inspect, copy_window and copy_targets over the first and last windows for the data loader.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "data/token_shard.h"
#include "fuzz_support.h"

namespace {

void read_shard(const std::string& path, int64_t vocab_size) {
  zero::fuzz::expect_only_user_errors([&] {
    const auto shard = zero::data::TokenShard::open(path, vocab_size);
    uint32_t largest = 0;
    int64_t targets = 0;
    for (int64_t i = 0; i < shard.size(); ++i) {
      largest = std::max(largest, shard.token(i));
      targets += shard.is_target(i) ? 1 : 0;
    }
    if (targets != shard.target_count()) {
      zero::fuzz::report_finding("target count", "target_count() disagrees with is_target()");
    }
    volatile uint32_t sink = largest;  // keeps the read loop
    (void)sink;
    const int64_t window = std::min<int64_t>(shard.size(), 65);
    std::vector<int32_t> narrow(static_cast<size_t>(window));
    std::vector<int64_t> wide(static_cast<size_t>(window));
    shard.copy_window(0, window, narrow.data());
    shard.copy_window(shard.size() - window, window, wide.data());
    shard.copy_targets(0, window, -100, narrow.data());
    shard.copy_targets(shard.size() - window, window, -100, wide.data());
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("token_shard");
  const std::string path = scratch.write("fuzz.bin", zero::fuzz::as_text(data, size));
  read_shard(path, std::numeric_limits<int64_t>::max());
  read_shard(path, 256);
  return 0;
}
