// Engine::save_checkpoint / load_checkpoint. Layout of DIR/<tag>/:
//   model.safetensors      parameters under their Hugging Face names (fp32 master weights)
//   optimizer.safetensors  "<parameter name>.<state>" for each optimizer state buffer
//   engine_state.json      counters, optimizer and schedule state, the model's config.json,
//                          the resolved DeepSpeed config, world size, client state
// Tensors are stored under logical parameter names, not rank-shaped blobs, so a checkpoint can
// later be loaded at another world size or ZeRO stage.
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/host_convert.h"
#include "engine/checkpoint_dir.h"
#include "engine/engine.h"
#include "io/atomic_file.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::engine {
namespace fs = std::filesystem;
namespace {

constexpr int kFormatVersion = 1;

Tensor host_copy(backend::Backend& be, const Tensor& t, const Shape& shape) {
  Tensor host = Tensor::empty(cpu_allocator(), shape, t.dtype(), MemoryCategory::kOther);
  be.copy_to_host(host.raw_data(), t);
  return host;
}

void write_json(const std::string& path, const nlohmann::json& json) {
  const std::string text = json.dump(2) + "\n";
  io::write_file_atomically(path, [&](std::FILE* f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      throw FileError(path + ": short write");
    }
  });
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": missing from the checkpoint (incomplete or not a zero.cpp checkpoint)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path + ": corrupt JSON (" + e.what() + ")");
  }
}

// The identity of a model for compatibility checks: every parameter's name and shape.
nlohmann::json parameter_manifest(model::Model& model) {
  nlohmann::json out = nlohmann::json::array();
  for (model::Parameter* p : model.parameters()) out.push_back({p->spec.name, p->spec.shape});
  return out;
}

}  // namespace

void Engine::save_checkpoint(const std::string& dir, const std::string& tag,
                             const nlohmann::json& client_state) {
  if (pending_) throw Error("save_checkpoint between forward() and backward(); finish the step first");
  const std::string resolved = tag.empty() ? "global_step" + std::to_string(global_steps_) : tag;
  auto& be = model_->backend();
  CheckpointWriter writer(dir, resolved);
  const fs::path staging = writer.staging_dir();

  std::vector<std::pair<std::string, Tensor>> weights;
  std::vector<std::pair<std::string, Tensor>> states;
  const auto optimizer_state = optimizer_->state_tensors();
  for (model::Parameter* p : model_->parameters()) {
    weights.emplace_back(p->spec.name, host_copy(be, p->value, p->spec.shape));
    for (const auto& [state_name, buffer] : optimizer_state) {
      Tensor slice = buffer.view(p->flat_offset, p->spec.shape);
      states.emplace_back(p->spec.name + "." + state_name, host_copy(be, slice, p->spec.shape));
    }
  }
  io::write_safetensors((staging / "model.safetensors").string(), weights, {{"format", "pt"}});
  io::write_safetensors((staging / "optimizer.safetensors").string(), states);

  nlohmann::json state;
  state["format"] = "zero.cpp checkpoint";
  state["format_version"] = kFormatVersion;
  state["tag"] = resolved;
  state["global_steps"] = global_steps_;
  state["global_samples"] = global_samples_;
  state["skipped_steps"] = skipped_steps_;
  state["micro_steps"] = micro_steps_;
  state["world_size"] = comm_.world_size();
  state["zero_stage"] = 0;
  state["optimizer"] = {{"type", settings_.optimizer_type},
                        {"step_count", optimizer_->step_count()},
                        {"hyper", optimizer_->hyper_json()},
                        {"state_names", nlohmann::json::array()}};
  for (const auto& [state_name, buffer] : optimizer_state) state["optimizer"]["state_names"].push_back(state_name);
  state["scheduler"] = schedule_->state_json();
  state["parameters"] = parameter_manifest(*model_);
  if (model_->config()) state["model_config"] = model_->config()->to_hf_json();
  state["deepspeed_config"] = settings_.source_config;
  state["client_state"] = client_state;
  write_json((staging / "engine_state.json").string(), state);
  writer.commit();
}

nlohmann::json Engine::load_checkpoint(const std::string& dir, const std::string& tag) {
  if (pending_) throw Error("load_checkpoint between forward() and backward()");
  const std::string resolved = resolve_checkpoint_tag(dir, tag);
  const fs::path folder = fs::path(dir) / resolved;
  const nlohmann::json state = read_json((folder / "engine_state.json").string());
  if (state.value("format", "") != "zero.cpp checkpoint" ||
      state.value("format_version", 0) != kFormatVersion) {
    throw FileError((folder / "engine_state.json").string() +
                    ": not a zero.cpp checkpoint of format version " + std::to_string(kFormatVersion));
  }
  if (state.at("parameters") != parameter_manifest(*model_)) {
    throw FileError(folder.string() + ": checkpoint of another model (its parameter names or shapes "
                                      "differ from the model being trained); check --model");
  }
  if (state.at("optimizer").value("type", "") != settings_.optimizer_type) {
    throw FileError(folder.string() + ": checkpoint was trained with optimizer " +
                    state.at("optimizer").value("type", "?") + ", the config asks for " +
                    settings_.optimizer_type);
  }
  auto& be = model_->backend();
  const auto weights = io::SafetensorsFile::open((folder / "model.safetensors").string());
  const auto states = io::SafetensorsFile::open((folder / "optimizer.safetensors").string());
  auto optimizer_state = optimizer_->state_tensors();
  auto load_into = [&](const io::SafetensorsFile& file, const std::string& name, Tensor target,
                       const Shape& shape) {
    Tensor source = file.tensor(name);
    if (source.shape() != shape || source.dtype() != target.dtype()) {
      throw FileError(file.path() + ": tensor '" + name + "' is " + source.describe() +
                      ", expected " + std::string(dtype_name(target.dtype())) + shape_to_string(shape));
    }
    be.copy_from_host(target, source.raw_data());
  };
  for (model::Parameter* p : model_->parameters()) {
    load_into(weights, p->spec.name, p->value, p->spec.shape);
    for (auto& [state_name, buffer] : optimizer_state) {
      load_into(states, p->spec.name + "." + state_name, buffer.view(p->flat_offset, p->spec.shape),
                p->spec.shape);
    }
  }
  optimizer_->set_step_count(state.at("optimizer").at("step_count").get<int64_t>());
  schedule_->load_state_json(state.at("scheduler"));
  global_steps_ = state.at("global_steps").get<int64_t>();
  global_samples_ = state.at("global_samples").get<int64_t>();
  skipped_steps_ = state.at("skipped_steps").get<int64_t>();
  micro_steps_ = state.at("micro_steps").get<int64_t>();
  model_->zero_grad();
  return state.value("client_state", nlohmann::json::object());
}

}  // namespace zero::engine
