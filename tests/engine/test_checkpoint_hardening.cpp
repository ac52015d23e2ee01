// Checkpoints a user (or a disk) damaged: every engine_state.json field is validated with an
// error naming the field and the file, `latest` only names folders inside the checkpoint
// directory, counters at the int64 edge are refused instead of wrapping, non-finite weights are
// named at load, and a failed resume leaves the checkpoint directory byte for byte as it was.
// Each test is named after the bug it pins down.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "comm/self_comm.h"
#include "core/error.h"
#include "data/markov_source.h"
#include "engine/checkpoint_dir.h"
#include "engine/data_sources.h"
#include "engine/engine_state.h"
#include "support/text_has.h"
#include "engine/trainer.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace checkpoint_hardening_test {
namespace fs = std::filesystem;
using nlohmann::json;
using zero::testing::has;
using zero_test::small_model;
using zero_test::train_step;
using zero_test::zero_settings;

constexpr int64_t kSeqLen = 8;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Every file under `dir` with its bytes: a failed resume must leave this unchanged.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = read_file(entry.path());
    if (entry.is_directory()) files[fs::relative(entry.path(), dir).string() + "/"] = "";
  }
  return files;
}

// The message of the zero::Error `fn` throws ("" when it throws none). Any other exception fails
// the test: it would reach the user as "internal error".
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InternalError& e) {
    ADD_FAILURE() << "InternalError: " << e.what();
    return e.what();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a library exception escaped: " << e.what();
    return e.what();
  }
  return "";
}

struct EngineRun {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  std::unique_ptr<Engine> engine;
  explicit EngineRun(int stage = 0) {
    engine = std::make_unique<Engine>(small_model("gpt2", cpu), zero_settings(stage, 2, 1, 1), comm);
  }
};

class CheckpointHardening : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_ckpt_hardening_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains two steps and saves DIR/global_step2 with a synthetic-data client state.
  void save_good(int stage = 0) {
    EngineRun run(stage);
    for (int step = 0; step < 2; ++step) train_step(*run.engine, step, 0, kSeqLen);
    run.engine->save_checkpoint(dir_.string(), "", {{"data", {{"next_sample", 4}}}});
  }
  fs::path tag_dir() const { return dir_ / "global_step2"; }
  fs::path state_path() const { return tag_dir() / "engine_state.json"; }
  json state() const { return json::parse(read_file(state_path())); }
  void edit(const std::function<void(json&)>& change) {
    json s = state();
    change(s);
    write_file(state_path(), s.dump(1));
  }
  // Replaces the first `from` in engine_state.json's text (for numbers json cannot hold).
  void edit_text(const std::string& from, const std::string& to) {
    std::string text = read_file(state_path());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    write_file(state_path(), text);
  }
  std::string load_error() {
    EngineRun fresh;
    return error_of([&] { fresh.engine->load_checkpoint(dir_.string()); });
  }
  fs::path dir_;
};

TEST_F(CheckpointHardening, ArchitecturesEmptyInModelConfigIsAnErrorNotASegfault) {
  save_good();
  edit([](json& s) { s["model_config"]["architectures"] = json::array(); });
  const std::string message = error_of([&] { read_engine_state(tag_dir().string()); });
  EXPECT_TRUE(has(message, "model_config") && has(message, "architectures")) << message;
  EXPECT_TRUE(has(message, state_path().string())) << message;
}

TEST_F(CheckpointHardening, ClientStateNested200000LevelsIsAnErrorNotAStackOverflow) {
  save_good();
  edit([](json& s) { s["client_state"] = "DEEP"; });
  std::string text = read_file(state_path());
  const size_t at = text.find("\"DEEP\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 6, std::string(200000, '[') + std::string(200000, ']'));
  const std::string message = error_of([&] { parse_engine_state(text, "state.json"); });
  EXPECT_TRUE(has(message, "state.json") && has(message, "nests deeper")) << message;
}

TEST_F(CheckpointHardening, GlobalSamplesAtInt64MaxIsRefusedOnResume) {
  save_good();
  edit([](json& s) { s["global_samples"] = kInt64Max; });
  const std::string message = load_error();
  EXPECT_TRUE(has(message, "\"global_samples\"") && has(message, state_path().string())) << message;
}

TEST_F(CheckpointHardening, GlobalStepsTwoToThe64DoesNotResumeAtANegativeStep) {
  save_good();
  edit_text("\"global_steps\": 2", "\"global_steps\": 18446744073709551616");
  std::string message = load_error();
  EXPECT_TRUE(has(message, "\"global_steps\"") && has(message, state_path().string())) << message;
  // 2^64 - 1 (an unsigned JSON integer) and 2^63 (just past int64) as well.
  for (const char* value : {"18446744073709551615", "9223372036854775808", "-1"}) {
    edit_text("18446744073709551616", value);
    message = load_error();
    EXPECT_TRUE(has(message, "\"global_steps\"")) << value << ": " << message;
    edit_text(value, "18446744073709551616");
  }
}

TEST_F(CheckpointHardening, NextSampleAtInt64MaxIsRefusedOnResume) {
  save_good();
  edit([](json& s) { s["client_state"]["data"]["next_sample"] = kInt64Max; });
  EngineRun run;
  auto source = std::make_shared<data::MarkovSource>(16, 2, 3, 5);
  SyntheticData data(source, 0, 1, 0);
  TrainerOptions options;
  options.steps = 3;
  options.seq_len = kSeqLen;
  options.resume_dir = dir_.string();
  options.quiet = true;
  const auto before = snapshot(dir_);
  const std::string message = error_of([&] { run_training(*run.engine, data, nullptr, options); });
  EXPECT_TRUE(has(message, "client_state.data") && has(message, "next_sample") &&
              has(message, state_path().string()))
      << message;
  EXPECT_EQ(snapshot(dir_), before);
}

TEST_F(CheckpointHardening, FieldOfTheWrongTypeNamesTheFieldAndTheFile) {
  save_good();
  const struct {
    std::string field;
    std::function<void(json&)> change;
  } cases[] = {
      {"\"global_steps\"", [](json& s) { s["global_steps"] = "2"; }},
      {"\"world_size\"", [](json& s) { s["world_size"] = 1.5; }},
      {"\"zero_stage\"", [](json& s) { s["zero_stage"] = 7; }},
      {"\"optimizer.step_count\"", [](json& s) { s["optimizer"]["step_count"] = json::array(); }},
      {"\"optimizer.type\"", [](json& s) { s["optimizer"]["type"] = 3; }},
      {"\"optimizer.state_names[0]\"", [](json& s) { s["optimizer"]["state_names"][0] = "../x"; }},
      {"\"scheduler.last_batch_iteration\"", [](json& s) { s["scheduler"]["last_batch_iteration"] = "1"; }},
      {"\"parameters[0]\"", [](json& s) { s["parameters"][0][1] = {-4, 32}; }},
      {"\"parameters[1]\"", [](json& s) { s["parameters"][1][1] = {kInt64Max, kInt64Max}; }},
      {"\"parameters\"", [](json& s) { s["parameters"] = "all of them"; }},
      {"\"deepspeed_config\"", [](json& s) { s["deepspeed_config"] = 1; }},
      {"\"client_state\"", [](json& s) { s.erase("client_state"); }},
      {"\"format\"", [](json& s) { s["format"] = "something else"; }},
      {"\"format_version\"", [](json& s) { s["format_version"] = 99; }},
      {"\"shard_files\"", [](json& s) { s["shard_files"] = {"zero_shard_0_of_1.safetensors"}; }},
      {"\"surprise\"", [](json& s) { s["surprise"] = true; }},
      {"\"tag\"", [](json& s) { s["tag"] = "../elsewhere"; }},
      {"\"optimizer.type\"", [](json& s) { s["optimizer"]["type"] = "Adam\u001b[2J"; }},
      {"\"loss_scaler.scale\"",
       [](json& s) { s["loss_scaler"] = {{"scale", -1}, {"hysteresis", 2}, {"iteration", 0}, {"last_overflow_iteration", -1}}; }},
  };
  const std::string good = read_file(state_path());
  for (const auto& c : cases) {
    write_file(state_path(), good);
    edit(c.change);
    const std::string message = load_error();
    EXPECT_TRUE(has(message, c.field) && has(message, state_path().string())) << c.field << ": " << message;
    EXPECT_FALSE(has(message, "json.exception")) << message;
  }
}

TEST_F(CheckpointHardening, CountersThatContradictEachOtherAreRefused) {
  save_good();
  const std::string good = read_file(state_path());
  const struct {
    std::string field;
    std::function<void(json&)> change;
  } cases[] = {
      {"\"skipped_steps\"", [](json& s) { s["skipped_steps"] = 3; }},
      {"\"global_samples\"", [](json& s) { s["global_samples"] = 1; }},
      {"\"micro_steps\"", [](json& s) { s["micro_steps"] = 1; }},
      {"\"optimizer.step_count\"", [](json& s) { s["optimizer"]["step_count"] = 1; }},
      {"\"scheduler.last_batch_iteration\"", [](json& s) { s["scheduler"]["last_batch_iteration"] = 5; }},
      {"\"parameters\"", [](json& s) { s["parameters"].erase(s["parameters"].size() - 1); }},
  };
  for (const auto& c : cases) {
    write_file(state_path(), good);
    edit(c.change);
    const std::string message = load_error();
    EXPECT_TRUE(has(message, c.field)) << c.field << ": " << message;
  }
}

TEST_F(CheckpointHardening, LatestPointingOutsideTheDirectoryIsRefusedLikeResumeAndConvert) {
  save_good();
  for (const std::string latest : {"../other/global_step2", "/tmp", "..", ".tmp-x", "a/b"}) {
    write_file(dir_ / "latest", latest);
    const std::string message = error_of([&] { resolve_checkpoint_tag(dir_.string(), ""); });
    EXPECT_TRUE(has(message, (dir_ / "latest").string()) && has(message, "not a checkpoint folder"))
        << latest << ": " << message;
  }
}

TEST_F(CheckpointHardening, LatestPointingNowhereIsACleanFileError) {
  save_good();
  write_file(dir_ / "latest", "global_step9");
  std::string message = load_error();
  EXPECT_TRUE(has(message, "global_step9") && has(message, "does not exist")) << message;
  write_file(dir_ / "latest", "");
  message = load_error();
  EXPECT_TRUE(has(message, "latest") && has(message, "empty")) << message;
  // A trailing newline (DeepSpeed's files, editors) is fine.
  write_file(dir_ / "latest", "global_step2\n");
  EXPECT_EQ(load_error(), "");
}

TEST_F(CheckpointHardening, ShardFilesMustBeTheOnesTheWorldSizeImplies) {
  save_good(/*stage=*/1);
  const std::string good = read_file(state_path());
  edit([](json& s) { s["shard_files"][0] = "../../escape.safetensors"; });
  std::string message = load_error();
  EXPECT_TRUE(has(message, "\"shard_files[0]\"") && has(message, "zero_shard_0_of_1.safetensors")) << message;
  write_file(state_path(), good);
  edit([](json& s) { s["world_size"] = 2; });
  message = load_error();
  EXPECT_TRUE(has(message, "\"shard_files\"")) << message;
  write_file(state_path(), good);
  fs::remove(tag_dir() / "zero_shard_0_of_1.safetensors");
  message = load_error();
  EXPECT_TRUE(has(message, "zero_shard_0_of_1.safetensors") && has(message, "missing")) << message;
}

TEST_F(CheckpointHardening, NonFiniteWeightIsNamedAtLoadWithTensorAndFile) {
  for (int stage : {0, 1}) {
    fs::remove_all(dir_);
    {
      EngineRun run(stage);
      train_step(*run.engine, 0, 0, kSeqLen);
      run.engine->zero_stage().update_params().data<float>()[5] = std::nanf("");
      run.engine->save_checkpoint(dir_.string(), "nan");
    }
    EngineRun fresh(stage);
    const std::string message = error_of([&] { fresh.engine->load_checkpoint(dir_.string()); });
    const std::string file = stage == 0 ? "model.safetensors" : "zero_shard_0_of_1.safetensors";
    EXPECT_TRUE(has(message, file) && has(message, "NaN") && has(message, "element 5") &&
                has(message, fresh.engine->model().parameters()[0]->spec.name))
        << "stage " << stage << ": " << message;
  }
}

TEST_F(CheckpointHardening, FailedResumeLeavesTheCheckpointDirectoryUnchanged) {
  save_good();
  const std::string good = read_file(state_path());
  const struct {
    bool engine_rejects;  // false: the engine loads it, the trainer rejects the data position
    std::function<void(json&)> corrupt;
  } cases[] = {
      {true, [](json& s) { s["global_steps"] = "2"; }},
      {false, [](json& s) { s["client_state"]["data"]["next_sample"] = -1; }},
      {true, [](json& s) { s["parameters"][0][0] = "renamed"; }},
  };
  for (const auto& c : cases) {
    write_file(state_path(), good);
    edit(c.corrupt);
    const auto before = snapshot(dir_);
    // Through the engine, and through the trainer saving into the directory it resumes from.
    EXPECT_EQ(load_error() != "", c.engine_rejects);
    EngineRun run;
    auto source = std::make_shared<data::MarkovSource>(16, 2, 3, 5);
    SyntheticData data(source, 0, 1, 0);
    TrainerOptions options;
    options.steps = 4;
    options.seq_len = kSeqLen;
    options.resume_dir = options.save_dir = dir_.string();
    options.save_every = 1;
    options.quiet = true;
    EXPECT_NE(error_of([&] { run_training(*run.engine, data, nullptr, options); }), "");
    EXPECT_EQ(snapshot(dir_), before);
  }
}

TEST_F(CheckpointHardening, StepsAndMicroBatchAtInt64MaxAreRefusedBeforeTraining) {
  EngineRun run;
  auto source = std::make_shared<data::MarkovSource>(16, 2, 3, 5);
  SyntheticData data(source, 0, 1, 0);
  TrainerOptions options;
  options.seq_len = kSeqLen;
  options.quiet = true;
  options.steps = kInt64Max;
  std::string message = error_of([&] { run_training(*run.engine, data, nullptr, options); });
  EXPECT_TRUE(has(message, "--steps")) << message;
  options.steps = 3;
  options.seq_len = kInt64Max;
  message = error_of([&] { run_training(*run.engine, data, nullptr, options); });
  EXPECT_TRUE(has(message, "--seq-len")) << message;

  backend::CpuBackend cpu;
  comm::SelfComm comm;
  EngineSettings huge = zero_settings(0, kInt64Max, 1, 1);
  huge.train_batch_size = kInt64Max;
  Engine engine(small_model("gpt2", cpu), huge, comm);
  options.seq_len = kSeqLen;
  message = error_of([&] { run_training(engine, data, nullptr, options); });
  EXPECT_TRUE(has(message, "train_micro_batch_size_per_gpu")) << message;
  // A batch that fits but whose samples would pass 2^53 over the run.
  EngineSettings big = zero_settings(0, 1, 1, 1);
  big.train_batch_size = int64_t{1} << 52;
  Engine wide(small_model("gpt2", cpu), big, comm);
  message = error_of([&] { run_training(wide, data, nullptr, options); });
  EXPECT_TRUE(has(message, "--steps") && has(message, "global_samples")) << message;
}

TEST_F(CheckpointHardening, SaveRefusesAClientStateTooDeepToReadBack) {
  EngineRun run;
  json deep = json::object();
  for (int i = 0; i < 100; ++i) deep = json{{"x", deep}};
  const std::string message =
      error_of([&] { run.engine->save_checkpoint(dir_.string(), "deep", deep); });
  EXPECT_TRUE(has(message, "client state") && has(message, "deeper")) << message;
  EXPECT_FALSE(fs::exists(dir_ / "deep"));
}

TEST_F(CheckpointHardening, TruncatedOrGarbledStateTextIsOnlyEverAZeroError) {
  save_good();
  const std::string good = read_file(state_path());
  EXPECT_NO_THROW(parse_engine_state(good, "state.json"));
  // Every prefix length in steps, and bytes flipped along the text.
  for (size_t n = 0; n + 1 < good.size(); n += 13) {  // the last byte is the newline after '}'

    const std::string prefix = good.substr(0, n);
    EXPECT_NE(error_of([&] { parse_engine_state(prefix, "state.json"); }), "") << n;
  }
  for (size_t i = 0; i < good.size(); i += 29) {
    std::string garbled = good;
    garbled[i] = static_cast<char>(garbled[i] ^ 0x5A);
    (void)error_of([&] { parse_engine_state(garbled, "state.json"); });
  }
  for (const char* text : {"", "null", "[]", "{}", "1e400", "{\"format\": \"zero.cpp checkpoint\"}"}) {
    EXPECT_NE(error_of([&] { parse_engine_state(text, "state.json"); }), "") << text;
  }
}

}  // namespace checkpoint_hardening_test
}  // namespace zero::engine
