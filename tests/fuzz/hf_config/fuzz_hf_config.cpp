// Fuzzes the reader of a Hugging Face model folder's config.json: the input is written as
// DIR/config.json and read with TransformerConfig::from_hf_file, as `zero train --model DIR`,
// `zero inspect DIR` and `zero estimate --model DIR` do; then what those commands compute from
// it (the parameter count) and what saving writes back (to_hf_json).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "model/transformer_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("hf_config");
  const std::string path = scratch.write("config.json", zero::fuzz::as_text(data, size));
  zero::fuzz::expect_only_user_errors([&] {
    const auto config = zero::model::TransformerConfig::from_hf_file(path);
    (void)config.num_parameters();
    (void)config.to_hf_json().dump();
  });
  return 0;
}
