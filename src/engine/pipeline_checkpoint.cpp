// PipelineEngine::save_checkpoint: one checkpoint of the whole model from every stage, in the
// per-rank pieces layout of ZeRO stages 1-3 (engine_checkpoint.cpp), so Engine::load_checkpoint
// reads it at any layout - one rank, another dp, or a pipeline again (each stage loads its own
// parameters by name):
//   zero_shard_<r>_of_<N>.safetensors   N = pp x dp x tp world ranks, r = (p * dp + d) * tp + t
//       (comm::Mesh).
//       ZeRO-1 stages: each rank's partition pieces, as the Engine writes them.
//       ZeRO-0 stages: data rank 0 writes each parameter whole ("<name>@0"); the other replicas
//       write an empty file (they hold the same values).
//       Tensor parallelism (tp > 1): the pieces are keyed by logical offsets, cut into the
//       logical runs of each slice, replicated parameters written by tensor rank 0 only
//       (engine/tensor_parallel_checkpoint.h, append_logical_pieces), so the files are those
//       of the whole model whatever the layout.
//       The last stage's copy of a tied embedding is not written: the first stage's table
//       (equal to it) is the parameter, and loading fills the copy from it by name.
//   engine_state.json (world rank 0): the Engine's fields, zero_stage 1 (the pieces layout
//       whatever the stages' ZeRO stage), world_size N, the FULL model's manifest, and
//       "pipeline": {"stages", "parts"} for information.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "engine/checkpoint_dir.h"
#include "engine/checkpoint_tensors.h"
#include "engine/engine_state.h"
#include "engine/pipeline_engine.h"
#include "engine/tensor_parallel_checkpoint.h"
#include "io/atomic_file.h"
#include "io/safetensors_writer.h"
#include "model/tied_embedding_copy.h"
#include "optim/dynamic_loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::engine {
namespace fs = std::filesystem;
namespace {

Tensor host_f32(backend::Backend& be, const Tensor& t) {
  Tensor host = Tensor::empty(cpu_allocator(), {t.numel()}, DType::kF32, MemoryCategory::kOther);
  if (t.dtype() == DType::kF32) {
    be.copy_to_host(host.raw_data(), t);
  } else {
    Tensor wide = be.empty({t.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    be.copy(wide, t);
    be.copy_to_host(host.raw_data(), wide);
  }
  return host;
}

}  // namespace

void PipelineEngine::world_barrier() {
  // Data, pipeline, then tensor group: every rank of the pp x dp x tp grid has arrived once all
  // pass.
  engine_->comm().barrier();
  pipe_.barrier();
  if (comm::Comm* tensor = engine_->model().tensor_group(); tensor != nullptr) tensor->barrier();
}

double PipelineEngine::world_max(double value) {
  const double data = engine_->comm().all_reduce_scalar(value, comm::ReduceOp::kMax);
  const double pipe = pipe_.all_reduce_scalar(data, comm::ReduceOp::kMax);
  comm::Comm* tensor = engine_->model().tensor_group();
  return tensor != nullptr ? tensor->all_reduce_scalar(pipe, comm::ReduceOp::kMax) : pipe;
}

void PipelineEngine::save_checkpoint(const std::string& dir, const std::string& tag,
                                     const nlohmann::json& client_state) {
  Engine& e = *engine_;
  if (e.micro_steps_ % e.settings_.gradient_accumulation_steps != 0) {
    throw Error("save_checkpoint in the middle of gradient accumulation; save after a step");
  }
  const std::string resolved = tag.empty() ? "global_step" + std::to_string(e.global_steps_) : tag;
  validate_tag(resolved);
  const bool leader = reporting_rank();
  const int dp = mesh_.shape().dp;
  const int tp = mesh_.shape().tp;
  const int tensor_rank = mesh_.coordinate(comm::MeshAxis::kTensor);
  const int world = static_cast<int>(stages_) * dp * tp;
  const int data_rank = mesh_.coordinate(comm::MeshAxis::kData);
  const int world_rank = (static_cast<int>(stage_) * dp + data_rank) * tp + tensor_rank;
  const long id = static_cast<long>(world_max(leader ? static_cast<double>(::getpid()) : 0.0));
  std::unique_ptr<CheckpointWriter> writer;
  if (leader) writer = std::make_unique<CheckpointWriter>(dir, resolved, id);
  world_barrier();
  const fs::path staging = CheckpointWriter::staging_path(dir, resolved, id);

  sharding::ZeroStage& zero = e.zero_stage();
  backend::Backend& be = zero.optimizer_backend();
  const auto optimizer_state = e.optimizer_state_tensors();
  // The tied copy on a stage without the embedding is the first stage's table: not written.
  auto skipped = [&](const model::Parameter* p) {
    return p == tied_ && is_last_stage() && !is_first_stage();
  };
  std::vector<std::pair<std::string, Tensor>> pieces;
  // Keyed by logical offsets: a tensor-parallel slice's elements go in its logical runs.
  auto add = [&](const model::Parameter* p, int64_t param_offset, int64_t at, int64_t count) {
    append_logical_pieces(p->spec, tensor_rank, param_offset,
                          host_f32(be, zero.update_params().view(at, {count})), "", pieces);
    for (const auto& [state_name, buffer] : optimizer_state) {
      append_logical_pieces(p->spec, tensor_rank, param_offset,
                            host_f32(be, buffer.view(at, {count})), state_name, pieces);
    }
  };
  if (zero.stage() == 0) {
    if (data_rank == 0) {
      for (model::Parameter* p : model().parameters()) {
        if (!skipped(p)) add(p, 0, p->flat_offset, p->numel());
      }
    }
  } else {
    for (const sharding::ParamSlice& slice : zero.layout().slices()) {
      if (!skipped(slice.param))
        add(slice.param, slice.param_offset, slice.partition_offset, slice.count);
    }
  }
  io::write_safetensors((staging / shard_file_name(world_rank, world)).string(), pieces);
  world_barrier();  // every rank's file is in place

  if (leader) {
    nlohmann::json state;
    state["format"] = kCheckpointFormat;
    state["format_version"] = kCheckpointFormatVersion;
    state["tag"] = resolved;
    state["global_steps"] = e.global_steps_;
    state["global_samples"] = e.global_samples_;
    state["skipped_steps"] = e.skipped_steps_;
    state["micro_steps"] = e.micro_steps_;
    state["world_size"] = world;
    state["zero_stage"] = 1;
    state["shard_files"] = nlohmann::json::array();
    for (int r = 0; r < world; ++r) state["shard_files"].push_back(shard_file_name(r, world));
    state["optimizer"] = {{"type", e.settings_.optimizer_type},
                          {"step_count", e.optimizer_->step_count()},
                          {"hyper", e.optimizer_->hyper_json()},
                          {"state_names", nlohmann::json::array()}};
    for (const auto& [state_name, buffer] : optimizer_state) {
      state["optimizer"]["state_names"].push_back(state_name);
    }
    state["scheduler"] = e.schedule_->state_json();
    if (e.scaler_) state["loss_scaler"] = e.scaler_->state_json();
    state["parameters"] = e.parameter_manifest();
    state["model_config"] = config_.to_hf_json();
    state["deepspeed_config"] = e.settings_.source_config;
    state["client_state"] = client_state;
    const std::string text = state.dump(2) + "\n";
    const std::string path = (staging / "engine_state.json").string();
    io::write_file_atomically(path, [&](std::FILE* f) {
      if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
        throw FileError(path + ": short write");
      }
    });
    writer->commit();
  }
  world_barrier();  // committed before any rank goes on
}

}  // namespace zero::engine
