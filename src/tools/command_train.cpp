// `zero train`: trains a model with a DeepSpeed config. With no flags it trains the built-in tiny
// model on the synthetic Markov source with a built-in config and prints the source's entropy
// rate (the loss floor) next to the final loss.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "comm/mesh.h"
#include "config/config_dump.h"
#include "engine/pipeline_engine.h"
#include "comm/world.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "engine/data_sources.h"
#include "engine/engine_settings.h"
#include "engine/memory_preflight.h"
#include "engine/peak_flops.h"
#include "engine/trainer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_unit_values.h"
#include "model/partitioned_init.h"
#include "model/sequence_tiling.h"
#include "model/sequence_length.h"
#include "model/tensor_parallel.h"
#include "model/transformer_builder.h"
#include "optim/optimizer.h"
#include "tools/arg_parser.h"
#include "tools/command.h"
#include "tools/train_device.h"
#include "tools/train_parallelism.h"

namespace zero::tools {
namespace {

// Limits on counts typed on the command line: far beyond any real run, small enough that
// products with batch and sequence sizes stay inside 64-bit integers.
constexpr int64_t kMaxCountFlag = int64_t{1} << 40;
constexpr int64_t kMaxTrainSeqLen = int64_t{1} << 24;

// The built-in run: what `zero train` does with no flags.
constexpr const char* kBuiltInConfig = R"({
  "train_micro_batch_size_per_gpu": 16,
  "gradient_accumulation_steps": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.0}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto", "warmup_num_steps": 30, "warmup_type": "linear", "cos_min_ratio": 0.1}},
  "gradient_clipping": 1.0,
  "steps_per_print": 50
})";
constexpr int64_t kSyntheticVocab = 16;
constexpr int64_t kSyntheticOrder = 2;
constexpr int64_t kSyntheticSupport = 3;

std::vector<std::string> split_paths(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The built-in config with the user's flags written into it: a flag replaces the built-in
// value instead of contradicting it (only a user's own config can contradict a flag).
nlohmann::json built_in_config(const config::AutoValues& flags) {
  nlohmann::json c = nlohmann::json::parse(kBuiltInConfig);
  nlohmann::json& optimizer = c["optimizer"]["params"];
  if (flags.micro_batch_size) c["train_micro_batch_size_per_gpu"] = *flags.micro_batch_size;
  if (flags.gradient_accumulation_steps) {
    c["gradient_accumulation_steps"] = *flags.gradient_accumulation_steps;
  }
  if (flags.max_grad_norm) c["gradient_clipping"] = *flags.max_grad_norm;
  if (flags.learning_rate) optimizer["lr"] = *flags.learning_rate;
  if (flags.weight_decay) optimizer["weight_decay"] = *flags.weight_decay;
  if (flags.adam_epsilon) optimizer["eps"] = *flags.adam_epsilon;
  if (flags.adam_beta1) optimizer["betas"][0] = *flags.adam_beta1;
  if (flags.adam_beta2) optimizer["betas"][1] = *flags.adam_beta2;
  if (flags.warmup_steps) c["scheduler"]["params"]["warmup_num_steps"] = *flags.warmup_steps;
  return c;
}

// A flag that is absent stays unset (the Trainer's default applies); a given one is parsed
// strictly and range-checked, naming the flag.
std::optional<double> double_flag(const ArgParser& parser, const std::string& name, double min,
                                  double max, bool min_exclusive = false) {
  const std::string text = parser.get(name);
  if (text.empty()) return std::nullopt;
  const std::optional<double> value = parse_finite_double(text);
  const bool below = value && (min_exclusive ? *value <= min : *value < min);
  if (!value || below || *value > max) {
    throw ConfigError("zero train: --" + name + " must be a number " +
                      (min_exclusive ? "> " : ">= ") + std::to_string(min) +
                      (max < 1e300 ? " and <= " + std::to_string(max) : std::string()) +
                      ", got \"" + text + "\"");
  }
  return value;
}

std::optional<int64_t> count_flag(const ArgParser& parser, const std::string& name,
                                  int64_t min) {
  if (parser.get(name).empty()) return std::nullopt;
  const int64_t value = parser.get_int(name);
  if (value < min || value > kMaxCountFlag) {
    throw ConfigError("zero train: --" + name + " must be between " + std::to_string(min) +
                      " and " + std::to_string(kMaxCountFlag) + ", got " + std::to_string(value));
  }
  return value;
}

std::optional<bool> bool_flag(const ArgParser& parser, const std::string& name) {
  const std::string text = parser.get(name);
  if (text.empty()) return std::nullopt;
  const std::optional<bool> value = parse_bool(text);
  if (!value) {
    throw ConfigError("zero train: --" + name + " takes true or false, got \"" + text + "\"");
  }
  return value;
}

// The model's shape, before anything is allocated: "auto" bucket sizes need its hidden size.
bool is_model_folder(const std::string& model_arg) {
  std::error_code error;
  return std::filesystem::is_directory(model_arg, error);
}

model::TransformerConfig model_shape(const std::string& model_arg, bool synthetic_data) {
  if (is_model_folder(model_arg)) {
    return model::TransformerConfig::from_hf_file(model_arg + "/config.json");
  }
  model::TransformerConfig config = model::preset_config(model_arg);
  if (model_arg == "tiny" && synthetic_data) {
    // The built-in run: a small model sized for the synthetic vocabulary.
    config.vocab_size = kSyntheticVocab;
    config.hidden_size = 64;
    config.num_layers = 2;
    config.num_heads = config.num_kv_heads = 4;
    config.head_dim = 16;
    config.intermediate_size = 256;
  }
  return config;
}

// --peak-tflops: a positive finite rate of at most 1e6 TFLOP/s (an exaflop: no single device
// comes near), or nullopt to measure.
std::optional<double> peak_tflops_flag(const ArgParser& parser) {
  const std::string text = parser.get("peak-tflops");
  if (text.empty()) return std::nullopt;
  const std::optional<double> value = parse_finite_double(text);
  if (!value || *value <= 0.0 || *value > 1e6) {
    throw ConfigError("zero train: --peak-tflops must be a positive number of TFLOP/s (at most "
                      "1e6), e.g. 989 for an H100 SXM's dense bf16 rate; got \"" +
                      ArgParser::shown(text) + "\"");
  }
  return value;
}

// Processes of this job on this host (OpenMPI says; a Slurm launch without it counts the whole
// world, which can only over-estimate the memory a host needs).
int64_t ranks_on_this_machine(int64_t world_size) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* text = std::getenv(name)) {
      if (const std::optional<int64_t> value = parse_int64(text); value && *value >= 1) {
        return std::min(*value, world_size);
      }
    }
  }
  return world_size;
}

// What reading the config said, once, before training: what each "auto" became, keys that are
// ignored (warnings, on stderr) and settings that are unused here.
void print_config_notes(const config::DeepSpeedConfig& config, const std::string& source) {
  const auto autos = config.notes.of_kind(config::ConfigNote::Kind::kAuto);
  if (!autos.empty()) {
    std::printf("config %s: \"auto\" and absent values resolved as the Hugging Face Trainer "
                "does:\n", source.c_str());
    for (const auto& note : autos) std::printf("  %s\n", note.text.c_str());
  }
  for (const auto& note : config.notes.of_kind(config::ConfigNote::Kind::kNote)) {
    std::printf("note: %s\n", note.text.c_str());
  }
  for (const auto& note : config.notes.of_kind(config::ConfigNote::Kind::kWarning)) {
    std::fprintf(stderr, "zero: warning: %s\n", note.text.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int run_train(const Args& args) {
  ArgParser parser("train", args);
  parser.option("deepspeed", "", "DeepSpeed config, JSON or HJSON (default: a built-in config for the tiny run)")
      .option("strict-config", "false", "true: unknown config keys are errors instead of warnings")
      .option("model", "tiny",
              "a Hugging Face model folder or a preset (tiny, tiny-llama, tiny-qwen3, "
              "tiny-qwen3-moe, tiny-mixtral, gpt2-124m, gpt2-350m, llama-1b, llama-1b-mha)")
      .option("data", "synthetic", "token shards (.bin, comma-separated) or 'synthetic'")
      .option("eval-data", "", "token shards for evaluation (default: held-out synthetic samples when training on synthetic)")
      .option("eval-every", "0", "evaluate every N steps (0: at the end only)")
      .option("seq-len", "64", "tokens per sequence")
      .option("steps", "1000", "optimizer steps to train (total, including resumed ones); resolves total_num_steps: \"auto\"")
      .option("save", "", "checkpoint directory")
      .option("save-every", "0", "save every N steps (0: at the end)")
      .option("resume", "", "checkpoint directory to resume from (loads DIR/latest)")
      .option("seed", "1234", "seed for weights and data order")
      .option("pipeline-parallel-size", "",
              "pipeline stages (overrides pipeline.stages; default: the config, \"auto\" = 1); "
              "the data-parallel size is ranks / stages")
      .option("tensor-parallel-size", "",
              "tensor-parallel ranks (overrides tensor_parallel.autotp_size; default: the config, "
              "0 = 1): heads, MLP width and vocabulary split over them")
      .option("log-json", "", "append one JSON object per logged step to this file")
      .option("profile-kernels", "0",
              "print the per-kernel time table of this step (1-based, as step lines count; 0: none)")
      .option("profile-kernels-json", "", "also write that table as JSON to this file (bench/ reads it)")
      .option("peak-tflops", "",
              "the matmul rate MFU divides by, in TFLOP/s (e.g. 989 for an H100 SXM's dense bf16 "
              "datasheet figure); default: measured at the start of the run")
      .option("micro-batch", "", "train_micro_batch_size_per_gpu when \"auto\" or absent (Trainer default 8)")
      .option("grad-accum", "", "gradient_accumulation_steps when \"auto\" or absent (Trainer default 1)")
      .option("lr", "", "optimizer lr and scheduler warmup_max_lr when \"auto\" (Trainer default 5e-5)")
      .option("weight-decay", "", "optimizer weight_decay when \"auto\" (Trainer default 0.0)")
      .option("adam-beta1", "", "optimizer betas[0] when \"auto\" (Trainer default 0.9)")
      .option("adam-beta2", "", "optimizer betas[1] when \"auto\" (Trainer default 0.999)")
      .option("adam-epsilon", "", "optimizer eps when \"auto\" (Trainer default 1e-8)")
      .option("max-grad-norm", "", "gradient_clipping when \"auto\" (Trainer default 1.0)")
      .option("warmup-steps", "", "scheduler warmup_num_steps when \"auto\" (Trainer default 0)")
      .option("bf16", "", "true: bf16 mixed precision (bf16.enabled \"auto\" or absent; default off)")
      .option("fp16", "", "true: fp16 mixed precision (fp16.enabled \"auto\" or absent; default off)")
      .option("device", "auto",
              "auto (cuda when every rank sees a GPU, else cpu), cpu, sim: the simulated device "
              "(CPU kernels on memory host code may not touch; checks a run is device-clean "
              "without a GPU), cuda or cuda:N (a build with CUDA)")
      .option("tiled-mlp", "auto", "auto, off or N: run each block's MLP over N sequence shards, recomputed in backward (auto: ceil(seq-len / hidden) when that is > 1)")
      .option("tiled-logits", "auto", "auto, off or N: run the LM head + loss over N sequence shards, never holding the full logits (auto: when it lowers the peak)")
      .option("gradient-checkpointing", "false",
              "true: recompute each transformer block's activations in backward (less memory, "
              "about one more forward pass of compute; Hugging Face's gradient_checkpointing)")
      .option("allow-long-sequences", "false",
              "true: allow --seq-len past the model's max_position_embeddings (rotary models "
              "only: their positions are computed for any length; a learned position table, as "
              "GPT-2's, cannot extend)");
  if (!parser.parse()) return 0;
  const int64_t seq_len = parser.get_int("seq-len");
  const int64_t steps = parser.get_int("steps");
  const int64_t seed_value = parser.get_int("seed");
  if (seq_len < 2 || seq_len > kMaxTrainSeqLen) {
    throw ConfigError("zero train: --seq-len must be between 2 and " + std::to_string(kMaxTrainSeqLen) +
                      ", got " + std::to_string(seq_len));
  }
  if (steps < 0 || steps > kMaxCountFlag) {
    throw ConfigError("zero train: --steps must be between 0 and " + std::to_string(kMaxCountFlag) +
                      ", got " + std::to_string(steps));
  }
  const auto seed = static_cast<uint64_t>(seed_value);
  const std::optional<bool> strict = bool_flag(parser, "strict-config");

  // The data-parallel group: every rank of an mpirun/srun job, else this process alone.
  comm::Comm& comm = comm::world();
  const bool leader = comm.rank() == 0;
  const std::string model_arg = parser.get("model");
  const model::TransformerConfig shape = model_shape(model_arg, parser.get("data") == "synthetic");
  // "auto" values resolve as the Hugging Face Trainer resolves them: flags named like its
  // arguments, else its defaults; bucket sizes from the model.
  config::AutoValues autos;
  autos.world_size = comm.world_size();
  // The model-parallel sizes: the config reader counts batch sizes over world / (pp x tp x sp).
  autos.pipeline_parallel_size = count_flag(parser, "pipeline-parallel-size", 1);
  autos.tensor_parallel_size = count_flag(parser, "tensor-parallel-size", 1);
  autos.total_steps = steps;
  autos.hidden_size = shape.hidden_size;
  autos.add_trainer_optimizer = true;
  autos.micro_batch_size = count_flag(parser, "micro-batch", 1);
  autos.gradient_accumulation_steps = count_flag(parser, "grad-accum", 1);
  autos.warmup_steps = count_flag(parser, "warmup-steps", 0);
  autos.learning_rate = double_flag(parser, "lr", 0.0, 1e300, true);
  autos.weight_decay = double_flag(parser, "weight-decay", 0.0, 1e300);
  autos.adam_beta1 = double_flag(parser, "adam-beta1", 0.0, 0.999999);
  autos.adam_beta2 = double_flag(parser, "adam-beta2", 0.0, 0.999999);
  autos.adam_epsilon = double_flag(parser, "adam-epsilon", 0.0, 1.0, true);
  autos.max_grad_norm = double_flag(parser, "max-grad-norm", 0.0, 1e300);
  autos.bf16 = bool_flag(parser, "bf16");
  autos.fp16 = bool_flag(parser, "fp16");
  config::ConfigReadOptions read_options;
  read_options.strict = strict.value_or(false);
  const std::string config_source =
      parser.get("deepspeed").empty() ? "built-in config" : parser.get("deepspeed");
  const config::DeepSpeedConfig ds_config =
      parser.get("deepspeed").empty()
          ? config::DeepSpeedConfig::from_json(built_in_config(autos), config_source, autos,
                                               read_options)
          : config::DeepSpeedConfig::from_file(config_source, autos, read_options);
  if (leader) print_config_notes(ds_config, config_source);
  engine::EngineSettings settings = engine::settings_from_config(ds_config, config_source);
  if (leader && ds_config.dump_state) {
    // DeepSpeed's dump_state: the whole configuration in effect, before anything is built.
    std::printf("%s", config::configuration_dump(
                          settings.source_config,
                          "configuration in effect (dump_state; " + config_source + "):")
                          .c_str());
    std::fflush(stdout);
  }
  const std::string checkpointing = parser.get("gradient-checkpointing");
  if (checkpointing != "true" && checkpointing != "false") {
    throw ConfigError("zero train: --gradient-checkpointing takes true or false, got \"" +
                      checkpointing + "\"");
  }
  const std::optional<bool> allow_long = bool_flag(parser, "allow-long-sequences");
  model::check_sequence_length(shape, seq_len, allow_long.value_or(false), "zero train");
  model::SequenceTiling tiling;
  tiling.mlp_shards = model::parse_shards_flag("zero train: --tiled-mlp", parser.get("tiled-mlp"));
  tiling.logits_shards =
      model::parse_shards_flag("zero train: --tiled-logits", parser.get("tiled-logits"));
  const TrainParallelism parallel = resolve_train_parallelism(
      {comm.world_size(), count_flag(parser, "pipeline-parallel-size", 1),
       count_flag(parser, "tensor-parallel-size", 1), seq_len,
       !parser.get("save").empty() || !parser.get("resume").empty(), config_source},
      ds_config, settings, shape);
  const comm::MeshShape& mesh_shape = parallel.shape;
  const bool pipelined = parallel.pipelined();
  const bool tensor_parallel = parallel.tensor_parallel();
  // Before anything is allocated: does this run fit this machine's memory?
  engine::MemoryPreflightRequest need;
  need.micro_batch = settings.micro_batch_size;
  need.seq_len = seq_len;
  const bool sixteen_bit = settings.bf16.enabled || settings.fp16.enabled;
  need.param_bytes = need.activation_bytes = sixteen_bit ? 2 : 4;
  need.zero_stage = static_cast<int>(settings.zero.stage);
  need.world_size = comm.world_size();
  need.ranks_on_this_machine = ranks_on_this_machine(comm.world_size());
  need.activation_checkpointing = checkpointing == "true";
  need.tiled_mlp_shards = tiling.mlp_shards;
  need.tiled_logits_shards = tiling.logits_shards;
  need.sequence_parallel = settings.sequence_parallel_size;
  need.cpu_checkpointing = settings.activation_checkpointing.cpu_checkpointing;
  // Stage 3 without tensor or pipeline parallelism builds the model partitioned (zero.Init).
  const bool zero_init = settings.zero.stage == 3 && !parallel.tensor_parallel() && !parallel.pipelined();
  need.builds_partitioned = zero_init;
  need.pipeline_stages = mesh_shape.pp;
  need.tensor_parallel = mesh_shape.tp;
  need.gradient_accumulation = settings.gradient_accumulation_steps;
  need.onebit_compression = optim::Optimizer::is_onebit_type(settings.optimizer_type);
  need.hpz_partition_size = settings.zero.zero_hpz_partition_size;
  need.muon = optim::Optimizer::is_muon_type(settings.optimizer_type);

  const int64_t profile_kernels_step = parser.get_int("profile-kernels");
  TrainDevice train_device =
      open_train_device(parser.get("device"), comm, profile_kernels_step != 0);
  const std::unique_ptr<backend::Backend>& device = train_device.backend;
  // Opening the device allocated nothing of the run's: a GPU's memory bounds the model states and
  // activations, host memory the rest; on the CPU everything is host memory.
  if (const std::optional<int64_t> capacity = device->device_memory_capacity_bytes()) {
    engine::DeviceMemory device_memory;
    device_memory.name = device->device().to_string();
    device_memory.capacity_bytes = *capacity;
    device_memory.ranks_sharing = train_device.device_per_rank ? 1 : need.ranks_on_this_machine;
    engine::check_training_memory(shape, need, host_memory(), device_memory);
  } else {
    engine::check_training_memory(shape, need);
  }
  comm::Comm& group = *train_device.group;
  // Ulysses sequence parallelism (the config's sequence_parallel_size): groups of sp
  // consecutive ranks share each sequence, dp = world / sp; ZeRO runs over the data x sequence
  // group and the data sources are indexed by the data-parallel rank, so a sequence group reads
  // the same batches and the engine keeps each rank's part of them.
  std::optional<comm::Mesh> mesh;
  if (parallel.needs_mesh()) mesh.emplace(group, mesh_shape);
  const int data_rank = mesh ? mesh->coordinate(comm::MeshAxis::kData) : comm.rank();
  const int data_ranks = mesh_shape.dp;
  std::unique_ptr<model::Model> net;
  std::unique_ptr<engine::PipelineEngine> pipe;
  if (pipelined) {
    // Each rank builds its stage only (engine/pipeline_engine.h); a Hugging Face folder is
    // loaded whole (this tensor rank's slices with tensor parallelism), its stage's parameters
    // copied by name, and freed.
    std::unique_ptr<model::Model> weights;
    if (is_model_folder(model_arg)) {
      const model::TensorParallelLayout layout{mesh->coordinate(comm::MeshAxis::kTensor),
                                               mesh_shape.tp};
      weights = model::load_hf_model(model_arg, *device, DType::kF32, layout);
    }
    pipe = std::make_unique<engine::PipelineEngine>(
        weights ? *weights->config() : shape, *device, settings, *mesh,
        pipeline::PartitionMethod::parse(ds_config.pipeline.partition), seed, weights.get(),
        // N > 0: groups of N blocks per checkpoint, whatever --gradient-checkpointing says.
        engine::PipelineEngine::Checkpointing{checkpointing == "true",
                                              ds_config.pipeline.activation_checkpoint_interval});
    pipe->set_partitioned_transfers(ds_config.pipeline.pipe_partitioned,
                                    ds_config.pipeline.grad_partitioned);
    if (const char* fault = std::getenv("ZERO_TEST_PIPELINE_FAULT")) {
      // Test hook: "RANK:MICRO_BATCH" makes that world rank's stage throw in the forward pass of
      // that micro-batch of the first step, while its neighbours wait on it.
      int fault_rank = -1;
      long long micro_batch = -1;
      if (std::sscanf(fault, "%d:%lld", &fault_rank, &micro_batch) != 2) {
        throw ConfigError(std::string("ZERO_TEST_PIPELINE_FAULT='") + fault +
                          "': expected RANK:MICRO_BATCH, e.g. 1:2");
      }
      if (fault_rank == comm.rank()) pipe->fail_in_forward(micro_batch);
    }
    pipe->model().set_sequence_tiling(tiling);
  } else {
    // Tensor parallelism: this rank's part of every block and of the vocabulary.
    model::TensorParallelLayout layout;
    if (tensor_parallel) layout = {mesh->coordinate(comm::MeshAxis::kTensor), mesh_shape.tp};
    if (is_model_folder(model_arg) && zero_init) {
      // zero.Init from the folder: each rank reads only its shards' elements.
      net = model::load_hf_model_partitioned(model_arg, *device, DType::kF32);
    } else if (is_model_folder(model_arg)) {
      net = model::load_hf_model(model_arg, *device, DType::kF32, layout);  // slices of the tensors
    } else if (zero_init) {
      // DeepSpeed's zero.Init: each rank keeps only its partition, built unit by unit with the
      // values init_parameters() would give the whole model.
      net = model::build_transformer_partitioned(shape, *device, DType::kF32,
                                                 model::initial_unit_values(shape, seed));
    } else {
      net = model::build_transformer(shape, *device, DType::kF32, layout);
      model::init_parameters(*net, seed);  // each rank keeps its slices of the full model's values
    }
    if (tensor_parallel) net->set_tensor_group(&mesh->group(comm::MeshAxis::kTensor));
  }
  if (net) {
    net->set_activation_checkpointing(checkpointing == "true");
    net->set_sequence_tiling(tiling);
  }
  const int64_t vocab = net ? net->config()->vocab_size : shape.vocab_size;

  std::unique_ptr<engine::TrainingData> data, eval_data;
  const std::string data_arg = parser.get("data");
  if (data_arg == "synthetic") {
    if (vocab < kSyntheticVocab) {
      throw ConfigError("zero train: the synthetic source needs a vocabulary of at least " +
                        std::to_string(kSyntheticVocab) + " tokens; the model has " + std::to_string(vocab));
    }
    auto source = std::make_shared<data::MarkovSource>(kSyntheticVocab, kSyntheticOrder, kSyntheticSupport, seed);
    data = std::make_unique<engine::SyntheticData>(source, data_rank, data_ranks, 0);
    if (parser.get("eval-data").empty()) {
      eval_data = std::make_unique<engine::SyntheticData>(source, data_rank, data_ranks, 1);
    }
  } else {
    data = std::make_unique<engine::ShardData>(split_paths(data_arg), vocab, seq_len, data_rank,
                                               data_ranks, seed,
                                               settings.dataloader_drop_last);
  }
  if (!parser.get("eval-data").empty()) {
    eval_data = std::make_unique<engine::ShardData>(split_paths(parser.get("eval-data")), vocab, seq_len,
                                                    data_rank, data_ranks, seed + 1);
  }

  std::unique_ptr<engine::Engine> plain;
  if (!pipe) {
    plain = std::make_unique<engine::Engine>(std::move(net), settings,
                                             mesh ? mesh->data_sequence_group() : group,
                                             mesh ? &mesh->group(comm::MeshAxis::kSequence) : nullptr);
  }
  engine::Engine& engine = pipe ? pipe->engine() : *plain;
  engine::TrainerOptions options;
  options.steps = steps;
  options.seq_len = seq_len;
  options.save_dir = parser.get("save");
  options.save_every = parser.get_int("save-every");
  options.resume_dir = parser.get("resume");
  options.eval_every = parser.get_int("eval-every");
  options.log_json_path = parser.get("log-json");
  const std::optional<double> given_peak = peak_tflops_flag(parser);
  engine::MatmulPeak matmul_peak;
  if (given_peak) {
    options.peak_flops = *given_peak * 1e12;
    options.peak_flops_dtype = "given";
  } else {
    matmul_peak = engine::measure_matmul_peak(*device);
    // Its matrices (384 MiB in bf16 on a GPU) are freed: the run's peak starts without them.
    device->allocator().reset_peaks();
    options.peak_flops = matmul_peak.flops_per_second;
    options.peak_flops_dtype = dtype_name(matmul_peak.dtype);
  }
  options.kernel_profile = {profile_kernels_step, parser.get("profile-kernels-json")};
  options.kernel_profiler = train_device.profiler;
  if (const char* fault = std::getenv("ZERO_TEST_FAULT")) {
    // Test hook: "RANK:STEP" makes that rank fail after that step (see TrainerOptions).
    long long step = -1;
    if (std::sscanf(fault, "%d:%lld", &options.fault_rank, &step) != 2) {
      throw ConfigError(std::string("ZERO_TEST_FAULT='") + fault + "': expected RANK:STEP, e.g. 1:3");
    }
    options.fault_step = step;
  }
  if (!leader) {
    engine::run_training(engine, *data, eval_data.get(), options);
    return 0;
  }

  std::printf("zero train: %s (%lld parameters), data: %s\n", model_arg.c_str(),
              static_cast<long long>(engine.model().config()->num_parameters()), data->description().c_str());
  std::printf("device: %s%s\n", train_device.resolved.c_str(),
              parser.get("device") == "auto" ? " (--device auto)" : "");
  if (comm.world_size() > 1) {
    // The data-parallel size is world / sp; under sequence parallelism ZeRO still partitions
    // over every rank (the data x sequence group).
    std::printf("data parallel: %d ranks over %s, ZeRO stage %lld", mesh_shape.dp,
                comm.name().c_str(), static_cast<long long>(settings.zero.stage));
    if (mesh && mesh_shape.sp > 1) {
      std::printf(" over the %d ranks of the data x sequence group", comm.world_size());
    }
    std::printf("\n");
  }
  if (pipe) {
    std::printf("pipeline parallel: %d stages x dp=%d (1F1B over %lld micro-batches); this stage "
                "holds units [%lld, %lld) of %lld\n",
                mesh_shape.pp, mesh_shape.dp,
                static_cast<long long>(settings.gradient_accumulation_steps),
                static_cast<long long>(pipe->parts()[0]), static_cast<long long>(pipe->parts()[1]),
                static_cast<long long>(pipe->parts().back()));
    if (const int64_t n = ds_config.pipeline.activation_checkpoint_interval; n > 0) {
      std::printf("activation checkpointing: each stage's blocks in groups of %lld "
                  "(pipeline.activation_checkpoint_interval), one saved input per group\n",
                  static_cast<long long>(n));
    }
    if (tensor_parallel) {
      std::printf("tensor parallel within each stage: tp=%d (each rank holds %lld of %lld heads); "
                  "activations sent %s, their gradients %s\n",
                  mesh_shape.tp, static_cast<long long>(shape.num_heads / mesh_shape.tp),
                  static_cast<long long>(shape.num_heads),
                  ds_config.pipeline.pipe_partitioned ? "partitioned" : "whole",
                  ds_config.pipeline.grad_partitioned ? "partitioned" : "whole");
    }
  } else if (tensor_parallel) {
    std::printf("tensor parallel: tp=%d x sp=%d x dp=%d (each rank holds %lld of %lld heads and its "
                "part of the MLP and the vocabulary)\n",
                mesh_shape.tp, mesh_shape.sp, mesh_shape.dp,
                static_cast<long long>(shape.num_heads / mesh_shape.tp),
                static_cast<long long>(shape.num_heads));
  } else if (mesh) {
    std::printf("sequence parallel: sp=%d x dp=%d (Ulysses; each rank holds %lld of %lld tokens "
                "per sequence)\n",
                mesh_shape.sp, mesh_shape.dp, static_cast<long long>(seq_len / mesh_shape.sp),
                static_cast<long long>(seq_len));
  }
  std::printf("batch: %lld sequences x %lld tokens per step (micro %lld x accumulation %lld), "
              "optimizer %s, schedule %s\n",
              static_cast<long long>(settings.train_batch_size), static_cast<long long>(seq_len),
              static_cast<long long>(settings.micro_batch_size),
              static_cast<long long>(settings.gradient_accumulation_steps), settings.optimizer_type.c_str(),
              settings.scheduler_type.empty() ? "constant" : settings.scheduler_type.c_str());
  // What the units resolve (model/sequence_tiling.h) for this rank's part of each sequence.
  const int64_t local_seq = seq_len / std::max<int64_t>(1, settings.sequence_parallel_size);
  const int64_t rows = settings.micro_batch_size * local_seq;
  const int64_t mlp_shards =
      std::min(rows, model::resolve_mlp_shards(tiling.mlp_shards, local_seq, shape.hidden_size));
  const int64_t logits_shards = std::min(
      rows, model::resolve_logits_shards(tiling.logits_shards, local_seq, shape.hidden_size,
                                         shape.vocab_size));
  if (mlp_shards > 1 || logits_shards > 1) {
    std::printf("tiled compute over the %lld rows of a micro-batch: MLP in %lld shards (--tiled-mlp %s), "
                "logits + loss in %lld shards (--tiled-logits %s)\n",
                static_cast<long long>(rows), static_cast<long long>(mlp_shards),
                model::describe_shards(tiling.mlp_shards).c_str(), static_cast<long long>(logits_shards),
                model::describe_shards(tiling.logits_shards).c_str());
  }
  if (given_peak) {
    std::printf("MFU is relative to the given matmul rate, %.1f GFLOP/s (--peak-tflops)\n",
                options.peak_flops / 1e9);
  } else {
    std::printf("MFU is relative to this device's measured %s matmul rate, %.1f GFLOP/s "
                "(%lld^3 products)\n",
                options.peak_flops_dtype.c_str(), options.peak_flops / 1e9,
                static_cast<long long>(matmul_peak.size));
  }
  const engine::TrainingSummary summary = engine::run_training(engine, *data, eval_data.get(), options);

  std::printf("\nsummary: %lld steps in %.1f s (%.0f tokens/s)\n", static_cast<long long>(summary.steps),
              summary.seconds, summary.tokens_per_second);
  std::printf("  final train loss  %.4f\n", summary.final_loss);
  if (summary.final_eval_loss) std::printf("  final eval loss   %.4f\n", *summary.final_eval_loss);
  if (summary.entropy_floor) {
    const double reference = summary.final_eval_loss.value_or(summary.final_loss);
    std::printf("  entropy floor     %.4f nats/token (the source's exact entropy rate)\n", *summary.entropy_floor);
    std::printf("  gap to floor      %.1f%%\n", 100.0 * (reference - *summary.entropy_floor) / *summary.entropy_floor);
  }
  return 0;
}

}  // namespace zero::tools
