// Fuzzes the reader of a Hugging Face model folder's generation_config.json: the input is written
// as DIR/generation_config.json (with the fixture config.json beside it, whose eos_token_id is
// the fallback) and read with read_generation_defaults, as `zero generate --model DIR` does.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "generation/generation_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("generation_config");
  static const bool config_written =
      !scratch.write("config.json", R"({"eos_token_id": [2, 3]})").empty();
  (void)config_written;
  scratch.write("generation_config.json", zero::fuzz::as_text(data, size));
  zero::fuzz::expect_only_user_errors([&] {
    const auto defaults = zero::generation::read_generation_defaults(scratch.dir().string());
    (void)defaults.eos_token_ids.size();
  });
  return 0;
}
