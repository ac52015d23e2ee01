// `zero estimate` through the built executable: the seed example (176B parameters, 8 GPUs,
// ZeRO-3 with optimizer offload) prints a readable table with DeepSpeed's numbers, all stages
// are listed without --stage, --gpu-memory marks what fits and recommends a configuration,
// --json carries the exact bytes, and bad flags exit with 2 and a message naming the flag.
// With --pipeline-parallel-size / --tensor-parallel-size the rows are those of one GPU of the
// largest stage, equal to zero train's memory preflight (engine::estimate_training_memory).
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/memory_preflight.h"
#include "model/transformer_config.h"
#include "tools/cli_helpers.h"
#include "tools/shell_runner.h"

namespace estimate_test {

using Result = zero::testing::CliResult;
using zero::testing::has;
using zero::testing::Stderr;

// `zero <args>`: stdout and stderr together, or (merge_stderr false) stdout alone with stderr
// left on the test's own, so --json output parses.
Result run_zero(const std::string& args, bool merge_stderr = true) {
  return zero::testing::run_shell(zero::testing::zero_cli() + args,
                                  merge_stderr ? Stderr::kMerge : Stderr::kKeep);
}

// A line with every run of whitespace collapsed to one space and the ends trimmed, so table
// rows compare as words (no std::regex: GCC 12's -O2 sanitizer build warns inside <regex>).
std::string words(const std::string& line) {
  std::istringstream in(line);
  std::string out, word;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

// The table rows: indented lines whose first word is a stage number 0-3.
std::vector<std::string> table_rows(const std::string& output) {
  std::vector<std::string> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const std::string w = words(line);
    if (!line.empty() && line[0] == ' ' && w.size() > 2 && w[0] >= '0' && w[0] <= '3' && w[1] == ' ') {
      rows.push_back(w);
    }
  }
  return rows;
}

bool starts(const std::string& row, const std::string& prefix) { return row.rfind(prefix, 0) == 0; }

const std::string kSeed =
    "estimate --params 176B --largest-layer-params 3596615680 --gpus-per-node 8 --nodes 1 "
    "--stage 3 --offload-optimizer cpu";

TEST(ZeroEstimate, SeedExamplePrintsDeepSpeedsNumbers) {
  const Result r = run_zero(kSeed);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());  // the table as a user sees it, for the test log
  EXPECT_TRUE(has(r.output, "1 node x 8 GPUs = 8 GPUs")) << r.output;
  EXPECT_TRUE(has(r.output, "176000M total params, 3596M largest layer params")) << r.output;
  EXPECT_TRUE(has(words(r.output), "stage offload_optimizer offload_param zero_init GPU states")) << r.output;
  const auto rows = table_rows(r.output);
  ASSERT_EQ(rows.size(), 4u) << r.output;
  // GPU 4 * 3596615680 B = 13.40 GiB; CPU 176e9 * 18 * 1.5 B = 4425.64 GiB, * max(32, 18) = 7867.81.
  EXPECT_TRUE(rows[0] == "3 cpu cpu 1 13.40 GiB 4425.64 GiB -") << rows[0];
  EXPECT_TRUE(starts(rows[1], "3 cpu cpu 0 13.40 GiB 7867.81 GiB")) << rows[1];
  // + 2P/8 = 44e9 B: 54.38 GiB; CPU 176e9 * 16 * 1.5 = 3933.91 GiB.
  EXPECT_TRUE(starts(rows[2], "3 cpu none 1 54.38 GiB 3933.91 GiB")) << rows[2];
  EXPECT_TRUE(starts(rows[3], "3 cpu none 0 54.38 GiB 7867.81 GiB")) << rows[3];
}

TEST(ZeroEstimate, WithoutStageListsEveryStage) {
  const Result r = run_zero("estimate --params 1e9 --largest-layer-params 100M --gpus-per-node 4 --nodes 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = table_rows(r.output);
  ASSERT_EQ(rows.size(), 11u) << r.output;
  EXPECT_TRUE(starts(rows[0], "0 none none - 18.63 GiB")) << rows[0];      // 20e9 B
  EXPECT_TRUE(starts(rows[3], "2 cpu none - 1.86 GiB 44.70 GiB")) << rows[3];  // 2e9, 48e9
  EXPECT_TRUE(starts(rows[4], "2 none none - 3.96 GiB 22.35 GiB")) << rows[4];  // 4.25e9, 24e9
  EXPECT_TRUE(starts(rows[5], "3 cpu cpu 1 0.37 GiB 12.57 GiB")) << rows[5];    // 4e8, 13.5e9
  EXPECT_TRUE(has(r.output, "2 nodes x 4 GPUs = 8 GPUs")) << r.output;
}

TEST(ZeroEstimate, JsonCarriesExactBytes) {
  const Result r = run_zero(kSeed + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["total_params"], 176'000'000'000);
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][0]["gpu_bytes"], 14'386'462'720);
  EXPECT_EQ(j["rows"][0]["cpu_bytes"], 4'752'000'000'000);
  EXPECT_EQ(j["rows"][2]["gpu_bytes"], 58'386'462'720);
  EXPECT_EQ(j["rows"][2]["offload_param"], "none");
  EXPECT_EQ(j["rows"][2]["zero_init"], true);
}

TEST(ZeroEstimate, GpuMemoryMarksFitsAndRecommends) {
  // gpt2-124m on one GPU, micro-batch 4 x 1024: everything fits in 40 GiB; stage 0 is fastest.
  Result r = run_zero("estimate --model gpt2-124m --micro-batch 4 --seq-len 1024 --gpu-memory 40");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "Activations per GPU: micro-batch 4 x 1024 tokens, checkpointing off")) << r.output;
  EXPECT_TRUE(has(r.output, "GPU total")) << r.output;
  EXPECT_TRUE(has(r.output, "recommended: ZeRO-0 fits in 40 GiB per GPU")) << r.output;
  // llama-1b on 8 GPUs with a long micro-batch does not fit in 16 GiB without checkpointing, and
  // the command says that checkpointing would make it fit.
  r = run_zero("estimate --model llama-1b --gpus-per-node 8 --micro-batch 4 --seq-len 4096 --gpu-memory 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "nothing fits in 16 GiB per GPU")) << r.output;
  EXPECT_TRUE(has(r.output, "with --activation-checkpointing, ZeRO-")) << r.output;
  EXPECT_TRUE(has(r.output, " would fit")) << r.output;
  for (const auto& row : table_rows(r.output)) EXPECT_TRUE(row.size() >= 3 && row.compare(row.size() - 3, 3, " no") == 0) << row;
  r = run_zero(
      "estimate --model llama-1b --gpus-per-node 8 --micro-batch 4 --seq-len 4096 --gpu-memory 16 "
      "--activation-checkpointing");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "checkpointing on")) << r.output;
  EXPECT_TRUE(has(r.output, "recommended: ZeRO-")) << r.output;
  // Without activations, the verdict says what it does not count.
  r = run_zero("estimate --params 7B --stage 2 --gpus-per-node 8 --gpu-memory 80");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "activations are not counted")) << r.output;
  EXPECT_TRUE(has(r.output, "recommended: ZeRO-2 fits")) << r.output;  // 2*7e9 + 18*7e9/8 = 26.8 GiB
}

TEST(ZeroEstimate, BadFlagsExitWithTwoAndNameTheFlag) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--params 7B --stage 5", "--stage must be 0, 1, 2 or 3"},
      {"--params 7B --stage 2 --gpus-per-node 0", "--gpus-per-node must be at least 1"},
      {"--params lots --stage 2", "--params must be a positive count"},
      {"--params 7B --stage 2 --offload-optimizer disk", "--offload-optimizer must be none, cpu or nvme"},
      {"--params 7B --gpus-per-nod 8", "unknown flag --gpus-per-nod (did you mean --gpus-per-node?)"},
      {"--params 7B", "--largest-layer-params N is needed for the ZeRO-3 rows"},
      {"--params 7B --stage 0 --offload-optimizer cpu", "offload_optimizer needs ZeRO stage 1, 2 or 3"},
      {"--params 7B --stage 2 --offload-optimizer nvme", "nvme offload needs ZeRO stage 3"},
      {"--params 7B --stage 2 --micro-batch 4 --seq-len 512", "needs the model's shape: pass --model"},
      {"--model llama-1b --micro-batch 4", "--seq-len N is needed"},
      {"--model no-such-model", "unknown model preset \"no-such-model\""},
      {"--model llama-1b --params 7B", "either --model or --params"},
      {"--model tiny --gpu-memory lots", "--gpu-memory must be a positive number of GiB"},
      {"", "pass --params N"},
  };
  for (const Case& c : cases) {
    const Result r = run_zero("estimate " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

// Without --seq-len, --gpu-memory reports the longest sequence that fits for each option set,
// and each option set fits a longer sequence than the one before it (llama-1b on one 80 GiB GPU
// at ZeRO-3: plain ~36k, checkpointing ~106k, + tiling ~636k, + host checkpoints ~1.5M tokens).
TEST(ZeroEstimate, LongestSequenceThatFitsEachOptionSet) {
  const std::string args = "estimate --model llama-1b --stage 3 --offload-optimizer none --gpu-memory 80";
  Result r = run_zero(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "Longest sequence that fits 80 GiB per GPU")) << r.output;
  EXPECT_FALSE(has(r.output, "activations are not counted")) << r.output;
  r = run_zero(args + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output)["longest_sequence"];
  ASSERT_EQ(rows.size(), 4u) << r.output;
  EXPECT_EQ(rows[0]["options"], "plain");
  EXPECT_EQ(rows[3]["cpu_checkpointing"], true);
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GT(rows[i]["longest_seq_len"].get<int64_t>(), rows[i - 1]["longest_seq_len"].get<int64_t>()) << i;
  }
  EXPECT_GT(rows[0]["longest_seq_len"].get<int64_t>(), 16'000);
  EXPECT_GT(rows[3]["longest_seq_len"].get<int64_t>(), 1'000'000);
  EXPECT_GT(rows[3]["host_bytes"].get<int64_t>(), 0);
  // Sequence parallelism over 4 GPUs: lengths are multiples of 4 and longer.
  r = run_zero(args + " --sequence-parallel 4 --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto sp_rows = nlohmann::json::parse(r.output)["longest_sequence"];
  EXPECT_EQ(sp_rows[1]["longest_seq_len"].get<int64_t>() % 4, 0);
  EXPECT_GT(sp_rows[1]["longest_seq_len"].get<int64_t>(), rows[1]["longest_seq_len"].get<int64_t>());
}

// The long-sequence options change the estimate at a given length, and are checked.
TEST(ZeroEstimate, LongSequenceOptions) {
  const std::string base = "estimate --model llama-1b --stage 3 --seq-len 65536 --json --activation-checkpointing";
  auto peak = [](const Result& r) {
    return nlohmann::json::parse(r.output)["activations"]["peak_bytes"].get<int64_t>();
  };
  const Result plain = run_zero(base, false);
  const Result tiled = run_zero(base + " --tiled-mlp auto --tiled-logits auto", false);
  const Result host = run_zero(base + " --tiled-mlp auto --tiled-logits auto --cpu-checkpointing", false);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(tiled.exit_code, 0) << tiled.output;
  ASSERT_EQ(host.exit_code, 0) << host.output;
  EXPECT_LT(peak(tiled), peak(plain));
  EXPECT_LT(peak(host), peak(tiled));
  EXPECT_GT(nlohmann::json::parse(host.output)["activations"]["host_bytes"].get<int64_t>(), 0);
  const Result bad_tiles = run_zero("estimate --model tiny --seq-len 64 --stage 0 --tiled-mlp many");
  EXPECT_EQ(bad_tiles.exit_code, 2) << bad_tiles.output;
  EXPECT_TRUE(has(bad_tiles.output, "--tiled-mlp")) << bad_tiles.output;
  const Result host_alone = run_zero("estimate --model tiny --seq-len 64 --stage 0 --cpu-checkpointing");
  EXPECT_EQ(host_alone.exit_code, 2) << host_alone.output;
  EXPECT_TRUE(has(host_alone.output, "needs --activation-checkpointing")) << host_alone.output;
  const Result sp = run_zero("estimate --model tiny --seq-len 63 --stage 0 --sequence-parallel 2");
  EXPECT_EQ(sp.exit_code, 2) << sp.output;
  EXPECT_TRUE(has(sp.output, "divide the sequence length")) << sp.output;
}

// The preflight's figures for one ZeRO row of `zero estimate --model llama-1b` on 2 nodes x 8
// GPUs with micro-batch 2 x 1024 bf16 activations. `builds_partitioned` true leaves out the
// preflight's floor of a whole unpartitioned model, which the estimators do not count.
zero::engine::MemoryNeed preflight_need(const nlohmann::json& row, int64_t pp, int64_t tp,
                                        int64_t gradient_accumulation, bool builds_partitioned) {
  zero::engine::MemoryPreflightRequest r;
  r.micro_batch = 2;
  r.seq_len = 1024;
  r.param_bytes = 4;       // the estimators' accounting, unscaled
  r.activation_bytes = 2;  // --activation-dtype bf16 (the default)
  r.zero_stage = row["stage"].get<int>();
  r.world_size = 16;
  r.ranks_on_this_machine = 8;
  auto device = [](const nlohmann::json& name) {
    return name == "cpu"    ? zero::sharding::OffloadDevice::kCpu
           : name == "nvme" ? zero::sharding::OffloadDevice::kNvme
                            : zero::sharding::OffloadDevice::kNone;
  };
  r.offload_optimizer = device(row["offload_optimizer"]);
  r.offload_param = device(row["offload_param"]);
  r.builds_partitioned = builds_partitioned;
  r.pipeline_stages = pp;
  r.tensor_parallel = tp;
  r.gradient_accumulation = gradient_accumulation;
  return zero::engine::estimate_training_memory(zero::model::preset_config("llama-1b"), r);
}

const std::string kMeshBase =
    "estimate --model llama-1b --gpus-per-node 8 --nodes 2 --micro-batch 2 --seq-len 1024 --json ";

// Every row of a 2 x 2 x 4 mesh (pipelined: stages 0 and 1) and of a tensor-parallel-only mesh
// (ZeRO-3 included) has the preflight's GPU states, activations in flight and host memory.
TEST(ZeroEstimate, MeshRowsEqualTheMemoryPreflight) {
  struct Mesh {
    int64_t pp, tp, gas;
  };
  for (const Mesh m : {Mesh{2, 2, 4}, Mesh{4, 1, 2}, Mesh{1, 2, 1}}) {
    const std::string flags = "--pipeline-parallel-size " + std::to_string(m.pp) +
                              " --tensor-parallel-size " + std::to_string(m.tp) +
                              " --gradient-accumulation " + std::to_string(m.gas);
    const Result r = run_zero(kMeshBase + flags, /*merge_stderr=*/false);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_GE(j["rows"].size(), 3u) << r.output;
    for (const auto& row : j["rows"]) {
      const auto need = preflight_need(row, m.pp, m.tp, m.gas, true);
      EXPECT_EQ(row["gpu_bytes"].get<int64_t>(), need.model_state_bytes) << flags << row;
      EXPECT_EQ(row["gpu_total_bytes"].get<int64_t>(),
                need.model_state_bytes + need.activation_bytes) << flags << row;
      EXPECT_EQ(j["mesh"]["rank_params"].get<int64_t>(), need.rank_params) << flags;
      // Host memory of offloaded states, with the row's zero_init as the way the model is built.
      if (row["offload_optimizer"] != "none") {
        const bool zero_init = row["stage"] != 3 || row["zero_init"].get<bool>();
        EXPECT_EQ(row["cpu_bytes"].get<int64_t>(),
                  preflight_need(row, m.pp, m.tp, m.gas, zero_init).offloaded_bytes)
            << flags << row;
      }
    }
  }
}

TEST(ZeroEstimate, JsonAndTableNameTheMesh) {
  const std::string flags = "--pipeline-parallel-size 2 --tensor-parallel-size 2 "
                            "--gradient-accumulation 8";
  Result r = run_zero(kMeshBase + flags, /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["mesh"]["pipeline_parallel_size"], 2);
  EXPECT_EQ(j["mesh"]["tensor_parallel_size"], 2);
  EXPECT_EQ(j["mesh"]["data_parallel_size"], 4);
  EXPECT_EQ(j["mesh"]["micro_batches_in_flight"], 2);  // min(2 stages, 8 micro-batches)
  EXPECT_EQ(j["mesh"]["stage_layers"], 8);               // llama-1b: 16 blocks in 2 stages
  EXPECT_EQ(j["mesh"]["zero_stages_2_3_dropped"], true);
  EXPECT_EQ(j["activations"]["in_flight_bytes"].get<int64_t>(),
            2 * j["activations"]["peak_bytes"].get<int64_t>());
  for (const auto& row : j["rows"]) EXPECT_LE(row["stage"].get<int>(), 1) << row;
  // Without the mesh flags there is no "mesh" key (the output of earlier versions).
  r = run_zero(kMeshBase, /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(nlohmann::json::parse(r.output).contains("mesh")) << r.output;
  r = run_zero("estimate --model llama-1b --gpus-per-node 8 --nodes 2 " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "mesh: 2 pipeline stages x 2 tensor-parallel x 4 data-parallel"))
      << r.output;
  EXPECT_TRUE(has(r.output, "rows per GPU of the largest stage: 8 of 16 blocks")) << r.output;
  EXPECT_TRUE(has(r.output, "ZeRO stages 2 and 3 are left out")) << r.output;
  for (const auto& row : table_rows(r.output)) EXPECT_TRUE(row[0] == '0' || row[0] == '1') << row;
}

TEST(ZeroEstimate, MeshMistakesAreRefusedWithTheNumbers) {
  struct Case {
    std::string args;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {"--model llama-1b --gpus-per-node 6 --pipeline-parallel-size 4",
       {"the 6 GPUs", "--pipeline-parallel-size 4", "--tensor-parallel-size 1 = 4"}},
      {"--model llama-1b --gpus-per-node 4 --nodes 3 --pipeline-parallel-size 2 "
       "--tensor-parallel-size 8",
       {"the 12 GPUs", "--pipeline-parallel-size 2", "--tensor-parallel-size 8 = 16"}},
      {"--params 7B --stage 1 --gpus-per-node 8 --pipeline-parallel-size 2",
       {"--pipeline-parallel-size", "need --model"}},
      {"--params 7B --stage 1 --gpus-per-node 8 --tensor-parallel-size 2",
       {"--tensor-parallel-size", "need --model"}},
      // zero train refuses ZeRO stages 2 and 3 with a pipeline, with this reason.
      {"--model llama-1b --gpus-per-node 8 --pipeline-parallel-size 2 --stage 3",
       {"--stage 3 with --pipeline-parallel-size 2",
        "DeepSpeed refuses ZeRO stages 2 and 3 with a pipeline"}},
      {"--model llama-1b --gpus-per-node 8 --pipeline-parallel-size 2 --stage 2",
       {"--stage 2 with --pipeline-parallel-size 2"}},
      {"--model llama-1b --gpus-per-node 8 --pipeline-parallel-size 2 --seq-len 64 "
       "--sequence-parallel 2",
       {"--sequence-parallel 2 with --pipeline-parallel-size 2 is not built yet"}},
      {"--model tiny --gpus-per-node 8 --pipeline-parallel-size 8",
       {"--pipeline-parallel-size 8 is more than the model's 4 blocks"}},
      {"--model llama-1b --pipeline-parallel-size 0",
       {"--pipeline-parallel-size must be at least 1"}},
  };
  for (const Case& c : cases) {
    const Result r = run_zero("estimate " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    for (const std::string& part : c.parts) {
      EXPECT_TRUE(has(r.output, part)) << c.args << "\n" << r.output;
    }
  }
}

}  // namespace estimate_test
