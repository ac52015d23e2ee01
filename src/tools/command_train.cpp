// `zero train`: trains a model with a DeepSpeed config. With no flags it trains the built-in tiny
// model on the synthetic Markov source with a built-in config and prints the source's entropy
// rate (the loss floor) next to the final loss.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "comm/world.h"
#include "core/error.h"
#include "engine/data_sources.h"
#include "engine/engine_settings.h"
#include "engine/peak_flops.h"
#include "engine/trainer.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

namespace zero::tools {
namespace {

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

}  // namespace

int run_train(const Args& args) {
  ArgParser parser("train", args);
  parser.option("deepspeed", "", "DeepSpeed config JSON (default: a built-in config for the tiny run)")
      .option("model", "tiny", "a Hugging Face model folder or a preset (tiny, tiny-llama, gpt2-124m, llama-1b)")
      .option("data", "synthetic", "token shards (.bin, comma-separated) or 'synthetic'")
      .option("eval-data", "", "token shards for evaluation (default: held-out synthetic samples when training on synthetic)")
      .option("eval-every", "0", "evaluate every N steps (0: at the end only)")
      .option("seq-len", "64", "tokens per sequence")
      .option("steps", "1000", "optimizer steps to train (total, including resumed ones)")
      .option("save", "", "checkpoint directory")
      .option("save-every", "0", "save every N steps (0: at the end)")
      .option("resume", "", "checkpoint directory to resume from (loads DIR/latest)")
      .option("seed", "1234", "seed for weights and data order")
      .option("log-json", "", "append one JSON object per logged step to this file")
      .option("micro-batch", "", "resolves train_micro_batch_size_per_gpu: \"auto\"")
      .option("grad-accum", "", "resolves gradient_accumulation_steps: \"auto\"")
      .option("lr", "", "resolves \"auto\" learning rates")
      .option("gradient-checkpointing", "false",
              "true: recompute each transformer block's activations in backward (less memory, "
              "about one more forward pass of compute; Hugging Face's gradient_checkpointing)");
  if (!parser.parse()) return 0;
  const int64_t seq_len = parser.get_int("seq-len");
  const int64_t steps = parser.get_int("steps");
  const auto seed = static_cast<uint64_t>(parser.get_int("seed"));
  if (seq_len < 2 || steps < 0) throw ConfigError("zero train: --seq-len must be >= 2 and --steps >= 0");

  // The data-parallel group: every rank of an mpirun/srun job, else this process alone.
  comm::Comm& comm = comm::world();
  const bool leader = comm.rank() == 0;
  // "auto" values resolve from the command line, as the Hugging Face Trainer resolves them.
  config::AutoValues autos;
  autos.world_size = comm.world_size();
  autos.total_steps = steps;
  if (!parser.get("micro-batch").empty()) autos.micro_batch_size = parser.get_int("micro-batch");
  if (!parser.get("grad-accum").empty()) autos.gradient_accumulation_steps = parser.get_int("grad-accum");
  if (!parser.get("lr").empty()) autos.learning_rate = std::stod(parser.get("lr"));
  const engine::EngineSettings settings =
      parser.get("deepspeed").empty()
          ? engine::settings_from_config(
                config::DeepSpeedConfig::from_text(kBuiltInConfig, "built-in config", autos),
                "built-in config")
          : engine::settings_from_file(parser.get("deepspeed"), autos);

  backend::CpuBackend cpu;
  const std::string model_arg = parser.get("model");
  std::unique_ptr<model::Model> net;
  if (std::filesystem::is_directory(model_arg)) {
    net = model::load_hf_model(model_arg, cpu, DType::kF32);
  } else {
    model::TransformerConfig config = model::preset_config(model_arg);
    if (model_arg == "tiny" && parser.get("data") == "synthetic") {
      // The built-in run: a small model sized for the synthetic vocabulary.
      config.vocab_size = kSyntheticVocab;
      config.hidden_size = 64;
      config.num_layers = 2;
      config.num_heads = config.num_kv_heads = 4;
      config.head_dim = 16;
      config.intermediate_size = 256;
    }
    net = model::build_transformer(config, cpu, DType::kF32);
    model::init_parameters(*net, seed);
  }
  const std::string checkpointing = parser.get("gradient-checkpointing");
  if (checkpointing != "true" && checkpointing != "false") {
    throw ConfigError("zero train: --gradient-checkpointing takes true or false, got \"" +
                      checkpointing + "\"");
  }
  net->set_activation_checkpointing(checkpointing == "true");
  const int64_t vocab = net->config()->vocab_size;
  if (seq_len > net->config()->max_position_embeddings && net->config()->learned_positions) {
    throw ConfigError("zero train: --seq-len " + std::to_string(seq_len) + " exceeds the model's " +
                      std::to_string(net->config()->max_position_embeddings) + " positions");
  }

  std::unique_ptr<engine::TrainingData> data, eval_data;
  const std::string data_arg = parser.get("data");
  if (data_arg == "synthetic") {
    if (vocab < kSyntheticVocab) {
      throw ConfigError("zero train: the synthetic source needs a vocabulary of at least " +
                        std::to_string(kSyntheticVocab) + " tokens; the model has " + std::to_string(vocab));
    }
    auto source = std::make_shared<data::MarkovSource>(kSyntheticVocab, kSyntheticOrder, kSyntheticSupport, seed);
    data = std::make_unique<engine::SyntheticData>(source, comm.rank(), comm.world_size(), 0);
    if (parser.get("eval-data").empty()) {
      eval_data = std::make_unique<engine::SyntheticData>(source, comm.rank(), comm.world_size(), 1);
    }
  } else {
    data = std::make_unique<engine::ShardData>(split_paths(data_arg), vocab, seq_len, comm.rank(),
                                               comm.world_size(), seed);
  }
  if (!parser.get("eval-data").empty()) {
    eval_data = std::make_unique<engine::ShardData>(split_paths(parser.get("eval-data")), vocab, seq_len,
                                                    comm.rank(), comm.world_size(), seed + 1);
  }

  engine::Engine engine(std::move(net), settings, comm);
  engine::TrainerOptions options;
  options.steps = steps;
  options.seq_len = seq_len;
  options.save_dir = parser.get("save");
  options.save_every = parser.get_int("save-every");
  options.resume_dir = parser.get("resume");
  options.eval_every = parser.get_int("eval-every");
  options.log_json_path = parser.get("log-json");
  options.peak_flops = engine::measure_matmul_peak_flops(cpu);
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
  if (comm.world_size() > 1) {
    std::printf("data parallel: %d ranks over %s, ZeRO stage %lld\n", comm.world_size(),
                comm.name().c_str(), static_cast<long long>(settings.zero.stage));
  }
  std::printf("batch: %lld sequences x %lld tokens per step (micro %lld x accumulation %lld), "
              "optimizer %s, schedule %s\n",
              static_cast<long long>(settings.train_batch_size), static_cast<long long>(seq_len),
              static_cast<long long>(settings.micro_batch_size),
              static_cast<long long>(settings.gradient_accumulation_steps), settings.optimizer_type.c_str(),
              settings.scheduler_type.empty() ? "constant" : settings.scheduler_type.c_str());
  std::printf("MFU is relative to this machine's measured f32 matmul rate, %.1f GFLOP/s\n",
              options.peak_flops / 1e9);
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
