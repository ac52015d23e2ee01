// Engine::save_checkpoint / load_checkpoint. Layout of DIR/<tag>/:
//   ZeRO stage 0 (rank 0 writes, every rank holds everything):
//     model.safetensors      parameters under their Hugging Face names (fp32 master weights)
//     optimizer.safetensors  "<parameter name>.<state>" for each optimizer state buffer
//   ZeRO stages 1-3 (each rank writes only the pieces it owns):
//     zero_shard_<r>_of_<N>.safetensors
//                            "<parameter name>@<first element>" (fp32 master values) and
//                            "<parameter name>@<first element>.<state>", 1-D pieces
//   onebit_errors_<r>_of_<N>.safetensors
//                            1-bit Adam's error feedback, each rank's own (onebit_checkpoint.h)
//   engine_state.json        (rank 0) counters, optimizer and schedule state, the model's
//                            config.json, the resolved DeepSpeed config, world size, ZeRO stage,
//                            shard files, client state
// Tensors are stored under logical parameter names with element offsets, never rank-shaped
// blobs, so a checkpoint loads at any world size and any stage (checkpoint_tensors.h).
// Under Ulysses sequence parallelism the Engine's comm is the data x sequence group: ZeRO
// partitions over all dp * sp ranks, so every rank still owns disjoint pieces, N (world_size)
// is dp * sp, and the checkpoint loads at any sp and dp (sp = 1 included). Client state comes
// from rank 0; the ranks of a sequence group read the same data, so theirs is the same.
// Tensor parallelism writes the same format by logical names and offsets (N is then dp * tp
// shard files; tensor_parallel_checkpoint.h), so it loads at any tp and dp.
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <unistd.h>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "engine/checkpoint_dir.h"
#include "engine/checkpoint_tensors.h"
#include "engine/engine.h"
#include "engine/partial_offload.h"
#include "engine/engine_state.h"
#include "engine/nvme_optimizer_state.h"
#include "engine/onebit_checkpoint.h"
#include "engine/tensor_parallel_checkpoint.h"
#include "io/atomic_file.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "optim/dynamic_loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::engine {
namespace fs = std::filesystem;
namespace {

// Client state nests at most this deep, so every checkpoint written can be read back under the
// reader's nesting limit (io::kMaxJsonDepth counts the levels around client_state too).
constexpr size_t kMaxClientStateDepth = 48;

// Whether `value` nests deeper than `limit` levels (arrays and objects), found without recursion.
bool nests_deeper_than(const nlohmann::json& value, size_t limit) {
  std::vector<std::pair<const nlohmann::json*, size_t>> pending = {{&value, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > limit) return true;
    for (const nlohmann::json& child : *node) pending.emplace_back(&child, depth + 1);
  }
  return false;
}

// Checkpoints hold f32 whatever the storage dtype (bf16 master weights or optimizer states
// widen exactly), so any run can load any checkpoint and resume stays bit-exact.
Tensor host_copy(backend::Backend& be, const Tensor& t, const Shape& shape) {
  Tensor host = Tensor::empty(cpu_allocator(), shape, DType::kF32, MemoryCategory::kOther);
  if (t.dtype() == DType::kF32) {
    be.copy_to_host(host.raw_data(), t);
  } else {
    Tensor wide = be.empty({t.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    be.copy(wide, t);
    be.copy_to_host(host.raw_data(), wide);
  }
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

}  // namespace

// The identity of a model for compatibility checks: every parameter's name and shape (the
// full model's for a pipeline stage, see set_checkpoint_manifest).
nlohmann::json Engine::parameter_manifest() {
  nlohmann::json out = nlohmann::json::array();
  for (const ManifestEntry& entry : manifest()) out.push_back({entry.name, entry.shape});
  return out;
}

std::vector<ManifestEntry> Engine::manifest() {
  std::vector<ManifestEntry> out;
  if (checkpoint_manifest_) {
    for (const auto& [name, shape] : *checkpoint_manifest_) {
      out.push_back({name, shape, shape_numel(shape)});
    }
    return out;
  }
  // Tensor-parallel parts are listed by their logical (full) shapes.
  for (model::Parameter* p : model_->parameters()) out.push_back(logical_manifest_entry(*p));
  return out;
}

void Engine::save_partitioned(const std::string& staging_dir) {
  // The optimizer's buffers (master weights, states) live where it runs: the device, or the
  // host under optimizer offload.
  auto& be = zero_->optimizer_backend();
  const auto optimizer_state = optimizer_state_tensors();
  // Pieces by logical offsets; under tensor parallelism one file per (data, tensor) rank.
  const auto [tp_rank, tp] = tensor_rank_and_size(*model_);
  std::vector<std::pair<std::string, Tensor>> pieces;
  for (const sharding::ParamSlice& slice : zero_->layout().slices()) {
    const model::ParamSpec& spec = slice.param->spec;
    append_logical_pieces(spec, tp_rank, slice.param_offset,
                          host_copy(be, zero_->update_params().view(slice.partition_offset, {slice.count}),
                                    {slice.count}),
                          "", pieces);
    for (const auto& [state_name, buffer] : optimizer_state) {
      append_logical_pieces(spec, tp_rank, slice.param_offset,
                            host_copy(be, buffer.view(slice.partition_offset, {slice.count}),
                                      {slice.count}),
                            state_name, pieces);
    }
  }
  io::write_safetensors((fs::path(staging_dir) /
                         shard_file_name(comm_.rank() * tp + tp_rank, comm_.world_size() * tp))
                            .string(),
                        pieces);
}

void Engine::save_checkpoint(const std::string& dir, const std::string& tag,
                             const nlohmann::json& client_state) {
  if (runner_ != nullptr) {
    runner_->save_checkpoint(dir, tag, client_state);
    return;
  }
  if (pending_) throw Error("save_checkpoint between forward() and backward(); finish the step first");
  if (micro_steps_ % settings_.gradient_accumulation_steps != 0) {
    throw Error("save_checkpoint in the middle of gradient accumulation (micro-step " +
                std::to_string(micro_steps_ % settings_.gradient_accumulation_steps) + " of " +
                std::to_string(settings_.gradient_accumulation_steps) +
                "); accumulated gradients are not saved, so save after step()");
  }
  const std::string resolved = tag.empty() ? "global_step" + std::to_string(global_steps_) : tag;
  validate_tag(resolved);
  if (nests_deeper_than(client_state, kMaxClientStateDepth)) {
    throw ConfigError("save_checkpoint: the client state nests deeper than " +
                      std::to_string(kMaxClientStateDepth) +
                      " levels, more than a checkpoint can be read back with; flatten it");
  }
  // The optimizer's buffers (master weights, states) live where it runs: the device, or the
  // host under optimizer offload.
  auto& be = zero_->optimizer_backend();
  // Tensor parallelism: the data group of every tensor rank takes part; one rank leads.
  comm::Comm* tensor_group = model_->tensor_group();
  const auto [tp_rank, tp] = tensor_rank_and_size(*model_);
  const bool leader = comm_.rank() == 0 && tp_rank == 0;
  auto barrier = [&] {  // data groups, then the tensor group: every rank
    comm_.barrier();
    if (tensor_group != nullptr) tensor_group->barrier();
  };
  // Every rank writes into the staging folder rank 0 creates (named after rank 0's pid).
  double pid =
      comm_.all_reduce_scalar(leader ? static_cast<double>(::getpid()) : 0.0, comm::ReduceOp::kMax);
  if (tensor_group != nullptr) pid = tensor_group->all_reduce_scalar(pid, comm::ReduceOp::kMax);
  const long id = static_cast<long>(pid);
  std::unique_ptr<CheckpointWriter> writer;
  if (leader) writer = std::make_unique<CheckpointWriter>(dir, resolved, id);
  barrier();
  const fs::path staging = CheckpointWriter::staging_path(dir, resolved, id);
  const int stage = zero_->stage();
  const auto optimizer_state = optimizer_state_tensors();

  if (stage == 0 && comm_.rank() == 0) {
    std::vector<std::pair<std::string, Tensor>> weights;
    std::vector<std::pair<std::string, Tensor>> states;
    for (model::Parameter* p : model_->parameters()) {
      // The optimizer's weights: the parameters themselves in f32, the f32 master copy with
      // 16-bit parameters; tensor-parallel parts gathered whole (collective over the group).
      const Tensor weight = zero_->update_params().view(p->flat_offset, p->spec.shape);
      Tensor whole = whole_logical_tensor(*model_, *p, host_copy(be, weight, p->spec.shape));
      if (leader) weights.emplace_back(p->spec.name, std::move(whole));
      for (const auto& [state_name, buffer] : optimizer_state) {
        Tensor slice = buffer.view(p->flat_offset, p->spec.shape);
        whole = whole_logical_tensor(*model_, *p, host_copy(be, slice, p->spec.shape));
        if (leader) states.emplace_back(p->spec.name + "." + state_name, std::move(whole));
      }
    }
    if (leader) {
      io::write_safetensors((staging / "model.safetensors").string(), weights, {{"format", "pt"}});
      io::write_safetensors((staging / "optimizer.safetensors").string(), states);
    }
  }
  if (stage >= 1) save_partitioned(staging.string());
  save_onebit_errors(*optimizer_, comm_, staging.string());
  barrier();  // every rank's files are in place

  if (leader) {
    nlohmann::json state;
    state["format"] = kCheckpointFormat;
    state["format_version"] = kCheckpointFormatVersion;
    state["tag"] = resolved;
    state["global_steps"] = global_steps_;
    state["global_samples"] = global_samples_;
    state["skipped_steps"] = skipped_steps_;
    state["micro_steps"] = micro_steps_;
    state["world_size"] = comm_.world_size() * tp;  // shard files: one per (data, tensor) rank
    state["zero_stage"] = stage;
    if (stage >= 1) {
      state["shard_files"] = nlohmann::json::array();
      for (int r = 0; r < comm_.world_size() * tp; ++r) {
        state["shard_files"].push_back(shard_file_name(r, comm_.world_size() * tp));
      }
    }
    state["optimizer"] = {{"type", settings_.optimizer_type},
                          {"step_count", optimizer_->step_count()},
                          {"hyper", optimizer_->hyper_json()},
                          {"state_names", nlohmann::json::array()}};
    for (const auto& [state_name, buffer] : optimizer_state) {
      state["optimizer"]["state_names"].push_back(state_name);
    }
    state["scheduler"] = schedule_->state_json();
    if (scaler_) state["loss_scaler"] = scaler_->state_json();
    state["parameters"] = parameter_manifest();
    if (model_->config()) state["model_config"] = model_->config()->to_hf_json();
    state["deepspeed_config"] = settings_.source_config;
    state["client_state"] = client_state;
    write_json((staging / "engine_state.json").string(), state);
    writer->commit();
  }
  barrier();  // the checkpoint is committed before any rank goes on
}

nlohmann::json Engine::load_checkpoint(const std::string& dir, const std::string& tag) {
  if (pending_) throw Error("load_checkpoint between forward() and backward()");
  const std::string resolved = resolve_checkpoint_tag(dir, tag);
  const fs::path folder = fs::path(dir) / resolved;
  // Everything is validated before the engine changes: a checkpoint that does not fit leaves the
  // engine as it was (a bad tensor value found while copying weights is the one exception).
  const EngineState state = read_engine_state(folder.string());
  require_same_manifest(state, manifest(), "the model being trained");
  if (state.optimizer_type != settings_.optimizer_type) {
    throw FileError(state.source + ": checkpoint was trained with optimizer " + state.optimizer_type +
                    ", the config asks for " + settings_.optimizer_type +
                    "; resume with the same optimizer type");
  }
  for (const std::string& state_name : optimizer_->state_names()) {
    if (!state.has_state_name(state_name)) {
      throw FileError(state.source + ": the checkpoint has no optimizer state \"" + state_name +
                      "\" (optimizer.state_names), which " + settings_.optimizer_type +
                      " with this config needs; resume with the optimizer settings it was saved with");
    }
  }
  // The checkpoint sits on an accumulation boundary; count micro-steps in this run's
  // gradient_accumulation_steps (it may differ from the saving run's).
  const std::optional<int64_t> micro_steps =
      mul_if_fits(state.global_steps, settings_.gradient_accumulation_steps);
  if (!micro_steps || *micro_steps > kMaxTrainingCounter) {
    throw FileError(state.source + ": global_steps " + std::to_string(state.global_steps) +
                    " x gradient_accumulation_steps " +
                    std::to_string(settings_.gradient_accumulation_steps) +
                    " micro-steps is more than the 2^53 a run may count; lower "
                    "gradient_accumulation_steps or start a fresh run");
  }
  // The optimizer's buffers (master weights, states) live where it runs: the device, or the
  // host under optimizer offload.
  auto& be = zero_->optimizer_backend();
  const CheckpointTensors tensors(folder.string(), state);
  auto optimizer_state = optimizer_state_tensors();
  std::vector<float> host;
  // Local elements of `param`, read through its logical coordinates (tensor parallelism).
  auto load = [&](const model::ParamSpec& param, const std::string& state_name, int64_t offset,
                  int64_t count, Tensor target) {
    host.resize(static_cast<size_t>(count));
    read_local_elements(tensors, param, state_name, offset, count, host.data());
    if (target.dtype() == DType::kF32) {
      be.copy_from_host(target, host.data());
    } else {
      // bf16 optimizer states: narrow on the device (exact for states saved from bf16).
      Tensor wide = be.empty({count}, DType::kF32, MemoryCategory::kWorkspace);
      be.copy_from_host(wide, host.data());
      be.copy(target, wide);
    }
  };
  if (zero_->stage() == 0) {
    for (model::Parameter* p : model_->parameters()) {
      load(p->spec, "", 0, p->numel(), zero_->update_params().view(p->flat_offset, {p->numel()}));
      for (auto& [state_name, buffer] : optimizer_state) {
        load(p->spec, state_name, 0, p->numel(), buffer.view(p->flat_offset, {p->numel()}));
      }
    }
  } else {
    for (const sharding::ParamSlice& slice : zero_->layout().slices()) {
      const model::ParamSpec& name = slice.param->spec;
      load(name, "", slice.param_offset, slice.count,
           zero_->update_params().view(slice.partition_offset, {slice.count}));
      for (auto& [state_name, buffer] : optimizer_state) {
        load(name, state_name, slice.param_offset, slice.count,
             buffer.view(slice.partition_offset, {slice.count}));
      }
    }
  }
  if (nvme_state_) nvme_state_->write_all(optimizer_state);
  if (partial_) partial_->upload_state(optimizer_state);
  optimizer_->states_loaded(optimizer_state);
  if (optimizer_->is_onebit()) {
    load_onebit_errors(*optimizer_, comm_, folder.string(), zero_->update_segments());
  }
  zero_->update_params_written();
  zero_->publish_parameters();
  zero_->zero_grad();
  optimizer_->set_step_count(state.optimizer_step_count);
  schedule_->set_last_batch_iteration(state.scheduler_last_batch_iteration);
  if (scaler_ && state.loss_scaler) scaler_->load_state_json(state.loss_scaler->to_json());
  global_steps_ = state.global_steps;
  if (curriculum_) curriculum_->restore(global_steps_);
  global_samples_ = state.global_samples;
  skipped_steps_ = state.skipped_steps;
  micro_steps_ = *micro_steps;
  return state.client_state;
}

}  // namespace zero::engine
