// Fuzzes the reading of a checkpoint's metadata, DIR/<tag>/engine_state.json: the input goes
// through parse_engine_state (the text-level reader behind read_engine_state, which resume,
// `zero convert` and `zero inspect` use), and is written to a tag folder that
// `zero inspect DIR/<tag>` (run_inspect, the command itself) then describes.
#include <cstddef>
#include <cstdint>

#include "engine/engine_state.h"
#include "fuzz_support.h"
#include "tools/command.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zero::fuzz::silence_stdout();  // inspect prints its description
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("checkpoint_state");
  static const std::string tag_dir = [] {
    const auto dir = scratch.dir() / "global_step2";
    std::filesystem::create_directories(dir);
    // The tensor files a state may name exist (empty), so inspect gets past checking for them
    // and on to describing the state.
    scratch.write("global_step2/model.safetensors", "");
    scratch.write("global_step2/optimizer.safetensors", "");
    for (int world = 1; world <= 4; ++world) {
      for (int rank = 0; rank < world; ++rank) {
        scratch.write("global_step2/zero_shard_" + std::to_string(rank) + "_of_" +
                          std::to_string(world) + ".safetensors",
                      "");
      }
    }
    return dir.string();
  }();
  const std::string text = zero::fuzz::as_text(data, size);
  scratch.write("global_step2/engine_state.json", text);
  zero::fuzz::expect_only_user_errors(
      [&] { (void)zero::engine::parse_engine_state(text, tag_dir + "/engine_state.json"); });
  zero::fuzz::expect_only_user_errors([&] { (void)zero::tools::run_inspect({tag_dir}); });
  return 0;
}
