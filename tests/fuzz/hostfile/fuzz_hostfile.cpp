// Fuzzes DeepSpeed hostfile parsing as `zero launch --hostfile FILE` uses it: parse_hostfile on
// the text, then the rank count (total_slots) and the per-host placement for it.
#include <cstddef>
#include <cstdint>

#include "comm/hostfile.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zero::fuzz::expect_only_user_errors([&] {
    const auto hosts = zero::comm::parse_hostfile(zero::fuzz::as_text(data, size), "fuzz");
    const int64_t ranks = zero::comm::total_slots(hosts);
    (void)zero::comm::ranks_per_host(hosts, ranks);
    (void)zero::comm::ranks_per_host(hosts, 2 * ranks + 1);  // oversubscribed
  });
  return 0;
}
