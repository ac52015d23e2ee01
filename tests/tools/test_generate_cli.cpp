// `zero generate` through the built executable: --json output equals the Generator's greedy
// tokens (the generation tests prove those against full forwards), the eos of
// generation_config.json stops a sequence, a training checkpoint folder generates what its
// converted Hugging Face folder does, a text prompt is encoded and the continuation decoded
// with the folder's tokenizer.json (streamed, with the speed line on stderr), sampling flags
// override the folder's defaults, and user errors exit 2 with a message naming the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "data/hf_tokenizer.h"
#include "generation/generator.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"
#include "tools/shell_runner.h"

namespace generate_cli_test {

using zero::testing::CliResult;
using zero::testing::run_shell;
using zero::testing::Stderr;
using zero::testing::zero_cli;

const std::string kTinyLlama = std::string(ZERO_TEST_FIXTURES) + "/hf/tiny-llama";
const std::string kTinyTokenizer =
    std::string(ZERO_TEST_FIXTURES) + "/tokenizers/tiny/tokenizer.json";

class ZeroGenerate : public zero::testing::ScratchDirTest {
 protected:
  ZeroGenerate() : ScratchDirTest("zero_generate_cli_") {}

  // A tiny Llama whose vocabulary covers the tiny tokenizer's ids, saved as a Hugging Face folder
  // with that tokenizer and a generation_config.json.
  std::string model_with_tokenizer(const std::string& generation_config) const {
    zero::backend::CpuBackend cpu;
    zero::model::TransformerConfig config = zero::model::preset_config("tiny-llama");
    config.vocab_size = 562;
    auto model = zero::model::build_transformer(config, cpu, zero::DType::kF32);
    zero::model::init_parameters(*model, 11, 0.5);  // peaked logits: a varied continuation
    const std::string dir = path("model");
    zero::model::save_hf_model(*model, dir, zero::DType::kF32);
    std::filesystem::copy_file(kTinyTokenizer, dir + "/tokenizer.json");
    write("model/generation_config.json", generation_config);
    return dir;
  }
};

nlohmann::json json_of(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST_F(ZeroGenerate, JsonIdsAreTheGeneratorsGreedyTokens) {
  const CliResult r = run_shell(zero_cli() + "generate --model " + kTinyLlama +
                                    " --prompt-ids 1,40,41,42 --max-new-tokens 9 --device cpu "
                                    "--dtype f64 --ignore-eos true --json",
                                Stderr::kDiscard);
  const nlohmann::json out = json_of(r);
  zero::backend::CpuBackend cpu;
  auto model = zero::model::load_hf_model(kTinyLlama, cpu, zero::DType::kF64);
  zero::generation::GenerationOptions options;
  options.max_new_tokens = 9;
  zero::generation::Generator generator(*model);
  const auto expected = generator.generate({1, 40, 41, 42}, options)[0].tokens;
  EXPECT_EQ(out["prompt_ids"].get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 40, 41, 42}));
  ASSERT_EQ(out["sequences"].size(), 1u);
  EXPECT_EQ(out["sequences"][0]["ids"].get<std::vector<int64_t>>(), expected);
  EXPECT_FALSE(out["sequences"][0]["stopped"].get<bool>());
  EXPECT_EQ(out["generated_tokens"].get<int64_t>(), 9);
  EXPECT_EQ(out["dtype"].get<std::string>(), "f64");
  EXPECT_GT(out["cache_bytes"].get<int64_t>(), 0);
}

TEST_F(ZeroGenerate, TheFoldersEosStopsASequence) {
  // Greedy from the folder's defaults; the first greedy token becomes the eos.
  const std::string base = "generate --model " + kTinyLlama + " --prompt-ids 1,9 --device cpu ";
  const nlohmann::json free_run =
      json_of(run_shell(zero_cli() + base + "--ignore-eos true --max-new-tokens 3 --json",
                        Stderr::kDiscard));
  const int64_t first = free_run["sequences"][0]["ids"][0].get<int64_t>();
  const nlohmann::json stopped = json_of(run_shell(
      zero_cli() + base + "--stop-ids " + std::to_string(first) + " --max-new-tokens 3 --json",
      Stderr::kDiscard));
  EXPECT_EQ(stopped["sequences"][0]["ids"], nlohmann::json::array({first}));
  EXPECT_TRUE(stopped["sequences"][0]["stopped"].get<bool>());
}

TEST_F(ZeroGenerate, TextPromptsUseTheFoldersTokenizer) {
  const std::string model = model_with_tokenizer(R"({"do_sample": true, "top_k": 5})");
  const std::string flags = "generate --model " + model +
                            " --prompt 'hello world' --max-new-tokens 6 --seed 3 --device cpu";
  const nlohmann::json out =
      json_of(run_shell(zero_cli() + flags + " --json", Stderr::kDiscard));
  const auto tokenizer = zero::data::load_hf_tokenizer(model);
  std::vector<int64_t> prompt;
  for (uint32_t id : tokenizer->encode("hello world", true)) prompt.push_back(id);
  EXPECT_EQ(out["prompt_ids"].get<std::vector<int64_t>>(), prompt);
  const auto ids = out["sequences"][0]["ids"].get<std::vector<uint32_t>>();
  ASSERT_EQ(ids.size(), 6u);
  const std::string text = tokenizer->decode(ids, true);
  EXPECT_EQ(out["sequences"][0]["text"].get<std::string>(), text);
  // Streamed text is the same continuation; the speed line goes to stderr.
  const CliResult streamed = run_shell(zero_cli() + flags, Stderr::kDiscard);
  EXPECT_EQ(streamed.exit_code, 0) << streamed.output;
  EXPECT_EQ(streamed.output, text + "\n");
  const CliResult both = run_shell(zero_cli() + flags, Stderr::kMerge);
  EXPECT_NE(both.output.find("zero generate: cpu f32, prompt " + std::to_string(prompt.size()) +
                             " tokens, 6 new tokens"),
            std::string::npos)
      << both.output;
  // The folder samples (top_k 5); --do-sample false makes the same run greedy, and greedy runs
  // do not depend on the seed.
  const std::string greedy = "generate --model " + model +
                             " --prompt 'hello world' --max-new-tokens 6 --device cpu "
                             "--do-sample false --json --seed ";
  EXPECT_EQ(json_of(run_shell(zero_cli() + greedy + "1", Stderr::kDiscard))["sequences"],
            json_of(run_shell(zero_cli() + greedy + "2", Stderr::kDiscard))["sequences"]);
  const nlohmann::json three = json_of(run_shell(
      zero_cli() + flags + " --num-sequences 3 --json", Stderr::kDiscard));
  ASSERT_EQ(three["sequences"].size(), 3u);
  EXPECT_EQ(three["sequences"][0]["ids"], out["sequences"][0]["ids"]);
}

TEST_F(ZeroGenerate, ACheckpointFolderGeneratesAsItsConvertedFolder) {
  const std::string ckpt = path("ckpt"), hf = path("hf");
  const CliResult train = run_shell(zero_cli() + "train --model tiny-llama --steps 3 --seq-len 16 "
                                    "--data synthetic --save " + ckpt);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  ASSERT_EQ(run_shell(zero_cli() + "convert " + ckpt + " " + hf).exit_code, 0);
  const std::string flags = " --prompt-ids 5,6,7 --max-new-tokens 6 --device cpu --json";
  const nlohmann::json from_checkpoint =
      json_of(run_shell(zero_cli() + "generate --model " + ckpt + flags, Stderr::kDiscard));
  const nlohmann::json from_folder =
      json_of(run_shell(zero_cli() + "generate --model " + hf + flags, Stderr::kDiscard));
  EXPECT_EQ(from_checkpoint["sequences"], from_folder["sequences"]);
  const CliResult bad_tag = run_shell(zero_cli() + "generate --model " + ckpt + flags +
                                      " --tag global_step99");
  EXPECT_EQ(bad_tag.exit_code, 2);
  EXPECT_NE(bad_tag.output.find("global_step99"), std::string::npos) << bad_tag.output;
  const CliResult tag_on_folder = run_shell(zero_cli() + "generate --model " + hf + flags +
                                            " --tag global_step3");
  EXPECT_NE(tag_on_folder.output.find("--tag picks a checkpoint of a checkpoint folder"),
            std::string::npos)
      << tag_on_folder.output;
  std::filesystem::create_directories(path("empty"));
  const CliResult empty = run_shell(zero_cli() + "generate --model " + path("empty") + flags);
  EXPECT_NE(empty.output.find("holds neither config.json"), std::string::npos) << empty.output;
  const CliResult f64 = run_shell(zero_cli() + "generate --model " + ckpt + flags + " --dtype f64");
  EXPECT_NE(f64.output.find("a checkpoint holds f32 weights"), std::string::npos) << f64.output;
}

TEST_F(ZeroGenerate, UserErrorsNameTheFix) {
  auto fails_with = [](const std::string& args, const std::string& phrase) {
    const CliResult r = run_shell(zero_cli() + "generate " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(phrase), std::string::npos) << args << "\n" << r.output;
  };
  const std::string model = "--model " + kTinyLlama + " --device cpu ";
  fails_with(model, "needs exactly one of --prompt TEXT, --prompt-file FILE and --prompt-ids");
  fails_with(model + "--prompt hi --prompt-ids 1", "got 2");
  fails_with("--prompt-ids 1", "needs --model DIR");
  fails_with(model + "--prompt hi", "a text prompt needs a tokenizer");
  fails_with(model + "--prompt-ids 1,x", "\"x\" is not one");
  fails_with(model + "--prompt-ids 1,,2", "is not one");
  fails_with(model + "--prompt-ids 1 --temperature 0 --do-sample true",
             "--temperature must be a finite number above 0");
  fails_with(model + "--prompt-ids 1 --top-p 2", "--top-p must lie in (0, 1]");
  fails_with(model + "--prompt-ids 1 --max-new-tokens 100",
             "past the model's 64 (max_position_embeddings)");
  fails_with(model + "--prompt-ids 1 --num-sequences 0", "--num-sequences must be from 1");
  fails_with(model + "--prompt-ids 300", "outside the model's vocabulary of 256");
  fails_with(model + "--prompt-ids 1 --dtype i32", "--dtype must be auto, f32, bf16, f16 or f64");
  fails_with(model + "--prompt-ids 1 --prompt-file /nonexistent/prompt.txt", "got 2");
  fails_with(model + "--tokenizer " + kTinyTokenizer + " --prompt-file /nonexistent/prompt.txt",
             "/nonexistent/prompt.txt");
}

TEST_F(ZeroGenerate, SixteenBitRunsOnTheSimulatedDeviceMatchTheCpu) {
  // bf16 weights and activations: the CPU keeps f32 weights with bf16 values, the simulated
  // device one bf16 buffer; both widen to f32 in every op, so the greedy tokens agree.
  const std::string flags = "generate --model " + kTinyLlama +
                            " --prompt-ids 1,2,3,4 --max-new-tokens 8 --dtype bf16 --ignore-eos "
                            "true --json --device ";
  const nlohmann::json cpu = json_of(run_shell(zero_cli() + flags + "cpu", Stderr::kDiscard));
  const nlohmann::json sim = json_of(run_shell(zero_cli() + flags + "sim", Stderr::kDiscard));
  EXPECT_EQ(cpu["sequences"], sim["sequences"]);
  EXPECT_EQ(sim["dtype"].get<std::string>(), "bf16");
}

}  // namespace generate_cli_test
