#include "tools/train_parallelism.h"

#include "core/check.h"
#include "core/error.h"
#include "engine/pipeline_engine.h"
#include "model/tensor_parallel.h"
#include "model/ulysses_attention.h"
#include "pipeline/parallel_sizes.h"

namespace zero::tools {

TrainParallelism resolve_train_parallelism(const TrainParallelismRequest& request,
                                           const config::DeepSpeedConfig& config,
                                           const engine::EngineSettings& settings,
                                           const model::TransformerConfig& model_shape) {
  pipeline::ParallelSizeFlags flags;
  flags.pipeline_parallel_size = request.pipeline_flag;
  flags.tensor_parallel_size = request.tensor_flag;
  const comm::MeshShape sizes = pipeline::resolve_parallel_sizes(request.world_size, config, flags);
  TrainParallelism out;
  // Pipeline parallelism (engine/pipeline_engine.h): dp = world / stages.
  if (sizes.pp > 1) engine::check_pipeline_settings(config.pipeline, request.config_source);
  // Tensor parallelism (model/tensor_parallel.h, model/vocab_parallel.h): each rank holds its
  // part of every block and of the vocabulary; ZeRO runs over the data-parallel group.
  if (sizes.tp > 1) {
    // Checkpoints are written by logical names and offsets (engine/tensor_parallel_checkpoint.h;
    // a pipeline's stages too, engine/pipeline_checkpoint.cpp) and resume at any layout.
    // Heads and widths that cannot split stop here with the sizes (ConfigError).
    model::tensor_parallel_block_config(model_shape, model::TensorParallelLayout{0, sizes.tp});
  }
  // The config reader counted the batch over the data-parallel ranks (DeepSpeed's arithmetic).
  ZERO_CHECK(settings.train_batch_size ==
                 settings.micro_batch_size * settings.gradient_accumulation_steps * sizes.dp,
             "train_batch_size " << settings.train_batch_size << " is not micro x gas x dp "
                                 << sizes.dp);
  out.shape = sizes.pp > 1 || sizes.tp > 1
                  ? sizes
                  : comm::Mesh::sequence_parallel_shape(request.world_size,
                                                        settings.sequence_parallel_size);
  // Ulysses sequence parallelism: the heads of this rank's tensor-parallel part and the
  // sequence must split by sp.
  const int sp = out.shape.sp;
  if (sp > 1) {
    const model::TransformerConfig heads = model::tensor_parallel_block_config(
        model_shape, model::TensorParallelLayout{0, out.shape.tp});
    model::ulysses_heads(heads.num_heads, heads.num_kv_heads, sp);
    if (request.seq_len % sp != 0) {
      throw ConfigError("zero train: --seq-len " + std::to_string(request.seq_len) +
                        " does not divide by sequence_parallel_size " + std::to_string(sp) +
                        "; each rank of a sequence group holds an equal part: use a multiple of it");
    }
  }
  return out;
}

}  // namespace zero::tools
