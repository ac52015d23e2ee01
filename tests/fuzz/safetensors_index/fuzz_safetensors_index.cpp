// Fuzzes the reader of a sharded Hugging Face folder's model.safetensors.index.json. The folder
// holds the tiny GPT-2 fixture's weights split into two shard files (even-numbered tensors in
// model-00001-of-00002.safetensors, odd ones in model-00002-of-00002.safetensors, in data-offset
// order); the input is written as the index and load_hf_weights reads the folder into a model
// built once from the fixture's config.json, as load_hf_model (`zero train --model DIR`) does.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "fuzz_support.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"
#include "model/transformer_config.h"

namespace {

const std::string kFixture = std::string(ZERO_TEST_FIXTURES) + "/hf/tiny-gpt2";

struct ShardedFolder {
  zero::fuzz::ScratchDir scratch{"safetensors_index"};
  zero::backend::CpuBackend cpu;
  std::unique_ptr<zero::model::Model> model;

  ShardedFolder() {
    const auto config = zero::model::TransformerConfig::from_hf_file(kFixture + "/config.json");
    model = zero::model::build_transformer(config, cpu, zero::DType::kF32);
    const auto weights = zero::io::SafetensorsFile::open(kFixture + "/model.safetensors");
    std::vector<std::pair<std::string, zero::Tensor>> shards[2];
    for (size_t i = 0; i < weights.entries().size(); ++i) {
      const std::string& name = weights.entries()[i].name;
      shards[i % 2].emplace_back(name, weights.tensor(name));
    }
    zero::io::write_safetensors(scratch.path("model-00001-of-00002.safetensors"), shards[0]);
    zero::io::write_safetensors(scratch.path("model-00002-of-00002.safetensors"), shards[1]);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ShardedFolder folder;
  folder.scratch.write("model.safetensors.index.json", zero::fuzz::as_text(data, size));
  zero::fuzz::expect_only_user_errors(
      [&] { zero::model::load_hf_weights(*folder.model, folder.scratch.dir().string()); });
  return 0;
}
