// prepare_corpus on JSONL and text documents: one text field per record, prompt/response records
// whose prompt tokens are masked (and whose response and separator are not), the tokenizer's
// separator after every document, the same bytes whatever the thread count, the validation
// split at a record boundary, uint32 shards for large vocabularies, and a clear error (file and
// line) for every kind of bad input.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/error_text.h"
#include "data/jsonl_documents.h"
#include "data/parallel_for.h"
#include "data/prepare_text.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"
#include "data/utf8_check.h"

namespace zero::data {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::has;

// token = byte + offset, with an optional separator id: enough to see where documents, prompts
// and separators land, and (offset 65536) to need uint32 shards.
class ShiftTokenizer final : public Tokenizer {
 public:
  ShiftTokenizer(uint32_t offset, std::optional<uint32_t> separator)
      : offset_(offset), separator_(separator) {}
  int64_t vocab_size() const override { return offset_ + 257; }
  std::vector<uint32_t> encode(std::string_view text, bool) const override {
    std::vector<uint32_t> ids;
    for (const char c : text) ids.push_back(static_cast<unsigned char>(c) + offset_);
    return ids;
  }
  std::string decode(const std::vector<uint32_t>& ids, bool) const override {
    std::string text;
    for (const uint32_t id : ids) {
      if (id != separator_) text += static_cast<char>(id - offset_);
    }
    return text;
  }
  std::optional<uint32_t> document_separator() const override { return separator_; }
  std::string description() const override { return "shift tokenizer"; }

 private:
  uint32_t offset_;
  std::optional<uint32_t> separator_;
};

constexpr uint32_t kSep = 256;  // with offset 0: the id after the bytes

std::string write_file(const testing::ScratchDir& dir, const std::string& name,
                       const std::string& text) {
  const std::string path = dir.path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_bytes(const std::string& path) {
  std::string bytes(std::filesystem::file_size(path), '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return "";
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), file));
  std::fclose(file);
  return bytes;
}

struct Shard {
  std::vector<uint32_t> tokens;
  std::vector<int> mask;  // 1 per target; all 1 without a mask
  bool has_mask = false;
};

Shard read_shard(const std::string& path) {
  const TokenShard shard = TokenShard::open(path, int64_t{1} << 32);
  Shard out;
  out.has_mask = shard.has_mask();
  for (int64_t i = 0; i < shard.size(); ++i) {
    out.tokens.push_back(shard.token(i));
    out.mask.push_back(shard.is_target(i) ? 1 : 0);
  }
  return out;
}

std::vector<uint32_t> ids(const std::string& text) {
  return std::vector<uint32_t>(text.begin(), text.end());
}

PrepareOptions options_for(const std::vector<std::string>& inputs, const std::string& out,
                           const Tokenizer* tokenizer) {
  PrepareOptions options;
  options.inputs = inputs;
  options.train_out = out;
  options.tokenizer = tokenizer;
  options.threads = 2;
  return options;
}

TEST(PrepareJsonl, TextFieldRecordsAreDocumentsWithSeparators) {
  testing::ScratchDir dir;
  const auto a = write_file(dir, "a.jsonl",
                            "{\"text\": \"ab\", \"id\": 1}\n\n  \r\n{\"id\": 2, \"text\": \"c\"}\r\n"
                            "{\"text\": \"\\u00e9\"}");  // no final newline; é is 2 bytes
  const ShiftTokenizer tokenizer(0, kSep);
  PrepareOptions options = options_for({a}, dir.path("train.bin"), &tokenizer);
  options.jsonl.text = "text";
  const PrepareResult result = prepare_corpus(options);
  const Shard shard = read_shard(options.train_out);
  EXPECT_FALSE(shard.has_mask);
  EXPECT_EQ(shard.tokens,
            (std::vector<uint32_t>{'a', 'b', kSep, 'c', kSep, 0xc3, 0xa9, kSep}));
  EXPECT_EQ(result.documents, 3);
  EXPECT_EQ(result.file_tokens, (std::vector<int64_t>{8}));
  EXPECT_EQ(result.train_targets, 8);
  EXPECT_FALSE(result.masked);
}

TEST(PrepareJsonl, PromptTokensAreMaskedResponseAndSeparatorAreTargets) {
  testing::ScratchDir dir;
  const auto a = write_file(dir, "pairs.jsonl",
                            "{\"q\": \"hi \", \"a\": \"yo\"}\n{\"q\": \"x\", \"a\": \"zz\"}\n");
  const ShiftTokenizer tokenizer(0, kSep);
  PrepareOptions options = options_for({a}, dir.path("train.bin"), &tokenizer);
  options.jsonl.prompt = "q";
  options.jsonl.response = "a";
  const PrepareResult result = prepare_corpus(options);
  const Shard shard = read_shard(options.train_out);
  ASSERT_TRUE(shard.has_mask);
  EXPECT_EQ(shard.tokens,
            (std::vector<uint32_t>{'h', 'i', ' ', 'y', 'o', kSep, 'x', 'z', 'z', kSep}));
  EXPECT_EQ(shard.mask, (std::vector<int>{0, 0, 0, 1, 1, 1, 0, 1, 1, 1}));
  EXPECT_TRUE(result.masked);
  EXPECT_EQ(result.train_targets, 6);
  EXPECT_EQ(result.train_tokens, 10);

  // The byte tokenizer has no separator: records are concatenated, still masked.
  options.tokenizer = nullptr;
  prepare_corpus(options);
  const Shard bytes = read_shard(options.train_out);
  EXPECT_EQ(bytes.tokens, ids("hi yoxzz"));
  EXPECT_EQ(bytes.mask, (std::vector<int>{0, 0, 0, 1, 1, 0, 1, 1}));
}

TEST(PrepareJsonl, OutputIsIdenticalForEveryThreadCount) {
  testing::ScratchDir dir;
  std::string jsonl, short_jsonl;
  for (int i = 0; i < 3000; ++i) {
    jsonl += "{\"prompt\": \"question " + std::to_string(i) +
             std::string(static_cast<size_t>(i % 17), '?') + "\", \"response\": \"answer " +
             std::to_string(i * 7) + "\"}\n";
    if (i == 49) short_jsonl = jsonl;
  }
  const auto a = write_file(dir, "a.jsonl", jsonl), b = write_file(dir, "b.jsonl", short_jsonl);
  const ShiftTokenizer tokenizer(0, kSep);
  std::string reference_train, reference_val;
  for (const int threads : {1, 2, 3, 8}) {
    PrepareOptions options = options_for({a, b}, dir.path("train.bin"), &tokenizer);
    options.val_out = dir.path("val.bin");
    options.val_fraction = 0.1;
    options.jsonl.prompt = "prompt";
    options.jsonl.response = "response";
    options.threads = threads;
    prepare_corpus(options);
    if (threads == 1) {
      reference_train = read_bytes(options.train_out);
      reference_val = read_bytes(options.val_out);
      continue;
    }
    EXPECT_EQ(read_bytes(options.train_out), reference_train) << threads << " threads";
    EXPECT_EQ(read_bytes(options.val_out), reference_val) << threads << " threads";
  }
  // Text files too (one document per file).
  std::string reference;
  for (const int threads : {1, 4}) {
    PrepareOptions options = options_for({a, b, a}, dir.path("text.bin"), &tokenizer);
    options.threads = threads;
    const PrepareResult result = prepare_corpus(options);
    EXPECT_EQ(result.file_tokens[0], static_cast<int64_t>(jsonl.size()) + 1);
    EXPECT_EQ(result.documents, 3);
    if (threads == 1) reference = read_bytes(options.train_out);
    EXPECT_EQ(read_bytes(options.train_out), reference);
  }
}

TEST(PrepareJsonl, ValidationSplitTakesWholeRecordsFromTheEnd) {
  testing::ScratchDir dir;
  // Records of 10 tokens each (8 bytes + ... ): prompt "pp", response "rrrrrrr", separator.
  std::string jsonl;
  for (int i = 0; i < 10; ++i) jsonl += "{\"p\": \"pp\", \"r\": \"rrrrrrr\"}\n";
  const auto a = write_file(dir, "a.jsonl", jsonl);
  const ShiftTokenizer tokenizer(0, kSep);
  PrepareOptions options = options_for({a}, dir.path("train.bin"), &tokenizer);
  options.val_out = dir.path("val.bin");
  options.val_fraction = 0.25;  // 25 of 100 tokens: the nearest boundary is 30 (or 20)
  options.jsonl.prompt = "p";
  options.jsonl.response = "r";
  const PrepareResult result = prepare_corpus(options);
  EXPECT_EQ(result.train_tokens + result.val_tokens, 100);
  EXPECT_EQ(result.val_tokens % 10, 0) << "the split cut a record";
  const Shard val = read_shard(options.val_out);
  ASSERT_TRUE(val.has_mask);
  ASSERT_GE(val.tokens.size(), 10u);
  EXPECT_EQ(val.mask[0], 0);  // starts with a prompt
  EXPECT_EQ(val.mask[2], 1);
  EXPECT_EQ(val.tokens.back(), kSep);
  EXPECT_EQ(result.val_targets, result.val_tokens / 10 * 8);
}

TEST(PrepareJsonl, LargeVocabulariesWriteUint32Shards) {
  testing::ScratchDir dir;
  const auto a = write_file(dir, "a.txt", "hello");
  const ShiftTokenizer tokenizer(65536, std::nullopt);  // ids 65536 + byte
  PrepareOptions options = options_for({a}, dir.path("train.bin"), &tokenizer);
  const PrepareResult result = prepare_corpus(options);
  EXPECT_TRUE(result.wide);
  const TokenShard shard = TokenShard::open(options.train_out, tokenizer.vocab_size());
  EXPECT_TRUE(shard.wide());
  EXPECT_EQ(shard.token(0), 65536u + 'h');
}

TEST(PrepareJsonl, InvalidUtf8InTextIsAnErrorForTokenizersThatNeedUnicode) {
  testing::ScratchDir dir;
  const auto bad = write_file(dir, "bad.txt", "ok\nline two \xff here\n");
  const ShiftTokenizer tokenizer(0, kSep);
  PrepareOptions options = options_for({bad}, dir.path("train.bin"), &tokenizer);
  const std::string message = error_of<FileError>([&] { prepare_corpus(options); });
  EXPECT_TRUE(has(message, bad) && has(message, "invalid UTF-8 at byte offset 12") &&
              has(message, "(line 2)"))
      << message;
  EXPECT_FALSE(fs::exists(options.train_out));
  // The byte tokenizer takes any bytes.
  options.tokenizer = nullptr;
  EXPECT_EQ(prepare_corpus(options).train_tokens, 19);
}

TEST(PrepareJsonl, BadRecordsNameTheFileAndLine) {
  testing::ScratchDir dir;
  const std::string out = dir.path("train.bin");
  const auto check = [&](const std::string& content, const std::vector<std::string>& parts,
                         const std::string& field = "text") {
    const auto path = write_file(dir, "in.jsonl", content);
    PrepareOptions options = options_for({path}, out, nullptr);
    options.jsonl.text = field;
    const std::string message = error_of<FileError>([&] { prepare_corpus(options); });
    EXPECT_TRUE(has(message, path)) << message;
    for (const auto& part : parts) EXPECT_TRUE(has(message, part)) << message;
  };
  const std::string good = "{\"text\": \"fine\"}\n";
  check(good + "{\"text\": \"unterminated\n", {"line 2", "not valid JSON"});
  check(good + good + "[1, 2]\n", {"line 3", "not a JSON object"});
  check(good + "\"just a string\"\n", {"line 2", "not a JSON object"});
  check(good + "{\"body\": \"x\", \"id\": 3}\n", {"line 2", "no field \"text\"", "\"body\", \"id\"", "--field"});
  check(good + "{\"text\": 42}\n", {"line 2", "\"text\" is number", "not a string"});
  check(good + "{\"text\": null}\n", {"line 2", "not a string"});
  check(good + "{\"text\": \"caf\xc3\"}\n", {"line 2", "invalid UTF-8 at byte offset 30"});
  // Many records (several batches) and threads: still the first bad line is reported.
  std::string many;
  for (int i = 0; i < 12000; ++i) many += (i == 9000 || i == 9900 || i == 11000) ? "oops\n" : good;
  check(many, {"line 9001"});
  // A prompt/response record missing its response.
  const auto path = write_file(dir, "pr.jsonl",
                               "{\"prompt\": \"a\", \"answer\": \"b\"}\n{\"prompt\": \"a\"}\n");
  PrepareOptions options = options_for({path}, out, nullptr);
  options.jsonl.prompt = "prompt";
  options.jsonl.response = "answer";
  const std::string message = error_of<FileError>([&] { prepare_corpus(options); });
  EXPECT_TRUE(has(message, "line 2") && has(message, "--response-field")) << message;
  EXPECT_FALSE(fs::exists(out));
}

TEST(PrepareJsonl, BadOptionsAreConfigErrors) {
  testing::ScratchDir dir;
  const auto a = write_file(dir, "a.jsonl", "{\"p\": \"\", \"r\": \"\", \"t\": \"x\"}\n");
  PrepareOptions options = options_for({a}, dir.path("train.bin"), nullptr);
  options.jsonl.text = "t";
  options.jsonl.prompt = "p";
  options.jsonl.response = "r";
  EXPECT_TRUE(has(error_of<ConfigError>([&] { prepare_corpus(options); }), "one or the other"));
  options.jsonl = {};
  options.jsonl.prompt = "p";
  EXPECT_TRUE(has(error_of<ConfigError>([&] { prepare_corpus(options); }),
                  "--prompt-field needs --response-field"));
  options.jsonl = {};
  options.jsonl.response = "r";
  EXPECT_TRUE(has(error_of<ConfigError>([&] { prepare_corpus(options); }),
                  "--response-field needs --prompt-field"));
  // Empty responses: every token masked, nothing to train on.
  options.jsonl.prompt = "t";
  options.jsonl.response = "r";
  EXPECT_TRUE(has(error_of<ConfigError>([&] { prepare_corpus(options); }), "nothing to train on"));
  options.jsonl = {};
  options.jsonl.text = "t";
  options.threads = -1;
  EXPECT_TRUE(has(error_of<ConfigError>([&] { prepare_corpus(options); }), "--threads"));
  EXPECT_FALSE(fs::exists(options.train_out));
}

TEST(PrepareJsonl, UnwritableOutputsFailBeforeTokenizing) {
  testing::ScratchDir dir;
  const auto a = write_file(dir, "a.txt", "some text");
  PrepareOptions options = options_for({a}, dir.path("no/such/folder/train.bin"), nullptr);
  std::string message = error_of<FileError>([&] { prepare_corpus(options); });
  EXPECT_TRUE(has(message, "--out") && has(message, "does not exist")) << message;
  options.train_out = dir.dir().string();
  message = error_of<FileError>([&] { prepare_corpus(options); });
  EXPECT_TRUE(has(message, "names a directory")) << message;
  options.train_out = dir.path("train.bin");
  options.val_out = dir.path("missing/val.bin");
  message = error_of<FileError>([&] { prepare_corpus(options); });
  EXPECT_TRUE(has(message, "--val-out") && has(message, "does not exist")) << message;
  EXPECT_FALSE(fs::exists(options.train_out));
}

TEST(JsonlLines, BlankLinesAreSkippedAndNumbersKept) {
  const auto lines = split_jsonl_lines("{}\n\n \t\r\n{\"a\":1}\r\n{}");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].number, 1);
  EXPECT_EQ(lines[1].number, 4);
  EXPECT_EQ(lines[1].offset, 8u);
  EXPECT_EQ(lines[2].number, 5);
  EXPECT_EQ(lines[2].text, "{}");
  EXPECT_TRUE(split_jsonl_lines("").empty());
}

TEST(Utf8Check, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(invalid_utf8_offset("plain ascii"), std::nullopt);
  EXPECT_EQ(invalid_utf8_offset("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), std::nullopt);  // é € 😀
  EXPECT_EQ(invalid_utf8_offset("a\x80"), 1u);                // lone continuation byte
  EXPECT_EQ(invalid_utf8_offset("ab\xc0\xaf"), 2u);           // overlong '/'
  EXPECT_EQ(invalid_utf8_offset("\xe0\x80\xaf"), 0u);         // overlong 3-byte form
  EXPECT_EQ(invalid_utf8_offset("x\xed\xa0\x80"), 1u);        // surrogate U+D800
  EXPECT_EQ(invalid_utf8_offset("\xf4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(invalid_utf8_offset("ok\xe2\x82"), 2u);           // truncated at the end
  EXPECT_EQ(invalid_utf8_offset("\xf5\x80\x80\x80"), 0u);
  EXPECT_EQ(line_of_offset("a\nb\nc", 4), 3);
}

TEST(ParallelFor, RunsEveryItemAndReportsTheLowestFailure) {
  std::vector<int> seen(1000, 0);
  parallel_for(seen.size(), 4, [&](size_t i) { seen[i] += 1; });
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 1000);
  for (int repeat = 0; repeat < 20; ++repeat) {
    const std::string message = error_of<ConfigError>([&] {
      parallel_for(1000, 4, [](size_t i) {
        if (i == 700 || i == 300 || i == 999) throw ConfigError("item " + std::to_string(i));
      });
    });
    EXPECT_EQ(message, "item 300");
  }
  parallel_for(0, 4, [](size_t) { FAIL(); });
  EXPECT_GE(default_thread_count(), 1);
}

TEST(WorkerPool, RunsJobsOnTheSameThreadsAndReportsTheLowestFailure) {
  WorkerPool pool(3);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  for (int job = 0; job < 5; ++job) {
    std::vector<int> seen(500, 0);
    const std::function<void(size_t)> task = [&](size_t i) {
      seen[i] += 1;
      const std::lock_guard<std::mutex> lock(mutex);
      ids.insert(std::this_thread::get_id());
    };
    pool.start(seen.size(), task);
    pool.wait();
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 500) << "job " << job;
  }
  // Threads persist across jobs (their thread-local caches stay warm), and none is the caller.
  EXPECT_LE(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  for (int repeat = 0; repeat < 10; ++repeat) {
    const std::function<void(size_t)> failing = [](size_t i) {
      if (i == 410 || i == 120 || i == 499) throw ConfigError("item " + std::to_string(i));
    };
    pool.start(500, failing);
    EXPECT_EQ(error_of<ConfigError>([&] { pool.wait(); }), "item 120");
  }
  const std::function<void(size_t)> nothing = [](size_t) { FAIL(); };
  pool.start(0, nothing);
  pool.wait();
}

}  // namespace
}  // namespace zero::data
