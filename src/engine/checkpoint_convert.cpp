#include "engine/checkpoint_convert.h"

#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "engine/checkpoint_dir.h"
#include "engine/checkpoint_tensors.h"
#include "engine/engine_state.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"

namespace zero::engine {
namespace fs = std::filesystem;

bool is_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(fs::path(dir) / "latest", ec);
}

std::unique_ptr<model::Model> load_checkpoint_model(const std::string& checkpoint_dir,
                                                    const std::string& tag,
                                                    backend::Backend& backend, DType dtype) {
  const std::string resolved = resolve_checkpoint_tag(checkpoint_dir, tag);
  const fs::path folder = fs::path(checkpoint_dir) / resolved;
  const EngineState state = read_engine_state(folder.string());
  if (!state.model_config) {
    throw FileError(state.source + ": has no model_config (the model was not a transformer "
                                   "built from a config), so it cannot become a model");
  }
  auto model = model::build_transformer_for_inference(*state.model_config, backend, dtype);
  std::vector<ManifestEntry> built;
  for (model::Parameter* p : model->parameters()) built.push_back({p->spec.name, p->spec.shape, p->numel()});
  require_same_manifest(state, built, "the model its model_config builds");
  // Whole tensors (stage 0) or the pieces every rank wrote (stages 1-3), consolidated; a
  // tensor-parallel run's pieces are by logical offsets too (tensor_parallel_checkpoint.h).
  // Read on the host, then one counted upload per tensor.
  const CheckpointTensors tensors(folder.string(), state);
  for (model::Parameter* p : model->parameters()) {
    Tensor host = Tensor::zeros_host(p->spec.shape, DType::kF32);
    tensors.read(p->spec.name, "", 0, p->numel(), host.data<float>());
    if (dtype != DType::kF32) host = converted_host(host, dtype);
    backend.copy_from_host(p->value, host.raw_data());
  }
  return model;
}

void convert_checkpoint_to_hf(const std::string& checkpoint_dir, const std::string& tag,
                              const std::string& out_dir, DType dtype) {
  backend::CpuBackend cpu;
  auto model = load_checkpoint_model(checkpoint_dir, tag, cpu);
  model::save_hf_model(*model, out_dir, dtype);
}

}  // namespace zero::engine
