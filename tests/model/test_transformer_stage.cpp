// Pipeline stages of a transformer (model::build_transformer_stage): each stage holds its units
// under the full model's parameter names, and init_parameters gives every parameter the value
// it has in the full model (the seed's stream is drawn over the full model's parameters), so
// a pipeline starts from the weights one rank would; a tied head on a stage without the
// embedding reads its own copy of the table, initialised like the table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/tied_embedding_copy.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

TransformerConfig small(const std::string& preset) {
  TransformerConfig c = preset_config(preset);
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = preset == "tiny" ? 4 : 2;
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.max_position_embeddings = 16;
  return c;
}

std::vector<float> values(Parameter& p) {
  return std::vector<float>(p.value.data<float>(), p.value.data<float>() + p.numel());
}

class TransformerStage : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformerStage, EveryStageHasTheFullModelsNamesAndValues) {
  backend::CpuBackend cpu;
  const TransformerConfig config = small(GetParam());
  auto full = build_transformer(config, cpu, DType::kF32);
  init_parameters(*full, 7);
  const int64_t units = config.num_layers + 2;
  for (int64_t begin = 0; begin < units; ++begin) {
    for (int64_t end = begin + 1; end <= units; ++end) {
      auto stage = build_transformer_stage(config, cpu, DType::kF32, begin, end);
      init_parameters(*stage, 7);
      const bool copy = config.tie_word_embeddings && begin > 0 && end == units;
      EXPECT_EQ(stage->units().size(), static_cast<size_t>(end - begin + (copy ? 1 : 0)));
      for (Parameter* p : stage->parameters()) {
        EXPECT_EQ(values(*p), values(full->parameter(p->spec.name)))
            << p->spec.name << " in units [" << begin << ", " << end << ")";
      }
      if (copy) {
        EXPECT_NE(dynamic_cast<TiedEmbeddingCopy*>(stage->units().front().get()), nullptr);
      }
    }
  }
}

TEST_P(TransformerStage, UnitInfosFollowTheFullModel) {
  backend::CpuBackend cpu;
  const TransformerConfig config = small(GetParam());
  auto full = build_transformer(config, cpu, DType::kF32);
  const std::vector<TransformerUnitInfo> infos = transformer_unit_infos(config);
  ASSERT_EQ(infos.size(), full->units().size());
  for (size_t i = 0; i < infos.size(); ++i) {
    int64_t params = 0;
    for (const auto& p : full->units()[i]->parameters()) params += p.numel();
    EXPECT_EQ(infos[i].name, full->units()[i]->name());
    EXPECT_EQ(infos[i].kind, full->units()[i]->kind());
    EXPECT_EQ(infos[i].parameters, params);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TransformerStage, ::testing::Values("tiny", "tiny-llama"));

TEST(TransformerStageRange, EmptyOrOutOfRangeIsAConfigError) {
  backend::CpuBackend cpu;
  const TransformerConfig config = small("tiny");
  EXPECT_THROW(build_transformer_stage(config, cpu, DType::kF32, 2, 2), ConfigError);
  EXPECT_THROW(build_transformer_stage(config, cpu, DType::kF32, -1, 2), ConfigError);
  EXPECT_THROW(build_transformer_stage(config, cpu, DType::kF32, 0, 6), ConfigError);
}

}  // namespace
}  // namespace zero::model
