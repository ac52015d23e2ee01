#include "model/partitioned_init.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "model/embedding_unit.h"
#include "model/lm_head_unit.h"
#include "model/parameter_init.h"
#include "model/transformer_block.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

class InitialUnitValues final : public UnitValueSource {
 public:
  InitialUnitValues(const TransformerConfig& config, uint64_t seed, double stddev)
      : config_(config), specs_(transformer_parameter_specs(config)), draws_(&config_, seed, stddev) {}

  void unit_values(const Model& model, size_t unit, int64_t begin, int64_t count, Tensor& out) override {
    ZERO_CHECK(drawn_units_ == 0 || unit + 1 >= drawn_units_,
               "initial values asked for unit " << unit << " after unit " << drawn_units_ - 1);
    // Every unit up to this one is drawn, in order: the stream must advance through them.
    while (drawn_units_ <= unit) draw_unit(*model.units()[drawn_units_++]);
    ZERO_CHECK(begin >= 0 && count >= 0 && begin + count <= static_cast<int64_t>(unit_.size()) &&
                   out.numel() == count,
               "unit " << unit << " values [" << begin << ", +" << count << ") of "
                       << unit_.size() << " into " << out.describe());
    const double* from = unit_.data() + begin;
    if (out.dtype() == DType::kF64) {
      std::copy(from, from + count, out.data<double>());
    } else {
      ZERO_CHECK(out.dtype() == DType::kF32, "initial values in " << dtype_name(out.dtype()));
      float* to = out.data<float>();
      for (int64_t i = 0; i < count; ++i) to[i] = static_cast<float>(from[i]);
    }
  }

 private:
  void draw_unit(const Unit& unit) {
    unit_.assign(static_cast<size_t>(unit.flat_numel()), 0.0);
    for (const Parameter& p : unit.parameters()) {
      // Specs come in the model's order; the next one with this name is this parameter.
      bool found = false;
      while (next_spec_ < specs_.size() && !found) {
        const ParamSpec& spec = specs_[next_spec_++];
        draws_.draw(spec, values_);
        if (spec.name != p.spec.name) continue;
        ZERO_CHECK(spec.shape == p.spec.shape, "parameter " << p.spec.name << " shape");
        std::copy(values_.begin(), values_.end(),
                  unit_.begin() + (p.flat_offset - unit.flat_begin()));
        found = true;
      }
      ZERO_CHECK(found, "no initial values for parameter " << p.spec.name);
    }
  }

  TransformerConfig config_;
  std::vector<ParamSpec> specs_;
  ParameterDraws draws_;
  size_t next_spec_ = 0;
  size_t drawn_units_ = 0;
  std::vector<double> unit_;    // the last drawn unit's values
  std::vector<double> values_;  // one parameter's draw
};

}  // namespace

std::unique_ptr<Model> build_transformer_partitioned(const TransformerConfig& config,
                                                     backend::Backend& backend, DType param_dtype,
                                                     std::unique_ptr<UnitValueSource> values,
                                                     const std::string& source) {
  config.validate(source);
  auto model = std::make_unique<Model>(backend, param_dtype);
  auto& embedding = static_cast<EmbeddingUnit&>(model->add_unit(std::make_unique<EmbeddingUnit>(config)));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    model->add_unit(std::make_unique<TransformerBlock>(config, layer));
  }
  Parameter* tied = config.tie_word_embeddings ? &embedding.token_embedding() : nullptr;
  model->add_unit(std::make_unique<LmHeadUnit>(config, tied));
  model->set_config(config);
  model->finalize_partitioned(std::move(values));
  return model;
}

std::unique_ptr<UnitValueSource> initial_unit_values(const TransformerConfig& config, uint64_t seed,
                                                     double stddev) {
  return std::make_unique<InitialUnitValues>(config, seed, stddev);
}

}  // namespace zero::model
