// Fuzzes `zero prepare`'s JSONL reader: the input is a whole JSONL file, prepared with
// prepare_corpus as the command does — once with `--field text`, once with `--prompt-field
// prompt --response-field response` (a masked shard, with a --val-out split) — into shards in
// the scratch folder; the training shard is then opened again as training opens it. One tokenizing thread: the threads only
// reorder work, and one keeps each run short. The byte tokenizer: any bytes are text to it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/prepare_text.h"
#include "data/token_shard.h"
#include "fuzz_support.h"

namespace {

void prepare(const std::string& input, const std::string& out,
             const zero::data::JsonlFields& fields, bool split) {
  zero::fuzz::expect_only_user_errors([&] {
    zero::data::PrepareOptions options;
    options.inputs = {input};
    options.train_out = out;
    if (split) options.val_out = out + ".val";
    options.val_fraction = 0.5;
    options.jsonl = fields;
    options.threads = 1;
    const auto result = zero::data::prepare_corpus(options);
    const auto shard = zero::data::TokenShard::open(out, 256);
    if (shard.size() != result.train_tokens || shard.target_count() != result.train_targets ||
        shard.has_mask() != result.masked) {
      zero::fuzz::report_finding("shard", "the written shard disagrees with prepare's counts");
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("jsonl_corpus");
  const std::string input = scratch.write("fuzz.jsonl", zero::fuzz::as_text(data, size));
  zero::data::JsonlFields text;
  text.text = "text";
  prepare(input, scratch.path("text.bin"), text, false);
  zero::data::JsonlFields pairs;
  pairs.prompt = "prompt";
  pairs.response = "response";
  prepare(input, scratch.path("pairs.bin"), pairs, true);
  return 0;
}
