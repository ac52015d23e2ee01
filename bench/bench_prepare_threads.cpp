// `zero prepare`'s tokenizing threads: prepare_corpus on a generated multi-document JSONL corpus
// (prompt/response records, so the mask path runs too) with 1 thread and with N, best of
// `repeats` runs each, and a check that the shards are byte-identical.
//   build/default/bench/bench_prepare_threads [megabytes=64] [threads=2] [repeats=3] [TOKENIZER]
// TOKENIZER is a tokenizer.json or its folder (default: the byte tokenizer). The time includes
// reading the corpus and writing the shards (what the command does after loading the tokenizer).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/prepare_text.h"

namespace {

namespace fs = std::filesystem;

double best_seconds(int repeats, const std::function<void()>& run) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Records of pseudo-random words (several scripts, digits, punctuation), about `bytes` in all.
void write_corpus(const std::string& path, size_t bytes) {
  const std::vector<std::string> words = {
      "the", "model", "trains", "on", "data", "zero", "shard", "token", "loss", "prompt",
      "response", "42", "3.14159", "caf\\u00e9", "na\\u00efve", "\\u65e5\\u672c\\u8a9e",
      "\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442", "(x + y)", "return", "\\\"quoted\\\"", "end."};
  std::ofstream out(path, std::ios::binary);
  uint64_t x = 88172645463325252ull;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  size_t written = 0;
  while (written < bytes) {
    std::string prompt, response;
    const size_t n = 20 + next() % 300;
    for (size_t i = 0; i < n; ++i) {
      std::string& side = i < n / 3 ? prompt : response;
      side += (side.empty() ? "" : " ") + words[next() % words.size()];
    }
    const std::string line = "{\"prompt\": \"" + prompt + "\", \"response\": \"" + response + "\"}\n";
    out << line;
    written += line.size();
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(fs::file_size(path), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t megabytes = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  std::unique_ptr<zero::data::Tokenizer> tokenizer =
      argc > 4 ? zero::data::load_hf_tokenizer(argv[4])
               : std::make_unique<zero::data::ByteTokenizer>();

  const fs::path dir = fs::temp_directory_path() / ("bench_prepare_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string corpus = (dir / "corpus.jsonl").string();
  write_corpus(corpus, megabytes << 20);

  zero::data::PrepareOptions options;
  options.inputs = {corpus};
  options.jsonl.prompt = "prompt";
  options.jsonl.response = "response";
  options.tokenizer = tokenizer.get();
  zero::data::PrepareResult result;
  const auto run = [&](int count, const std::string& out) {
    options.threads = count;
    options.train_out = (dir / out).string();
    return best_seconds(repeats, [&] { result = zero::data::prepare_corpus(options); });
  };
  const double one = run(1, "one.bin");
  const double many = run(threads, "many.bin");
  const bool same = read_all((dir / "one.bin").string()) == read_all((dir / "many.bin").string());
  const double mb = static_cast<double>(fs::file_size(corpus)) / 1e6;
  std::printf("tokenizer: %s\n", tokenizer->description().c_str());
  std::printf("corpus: %.1f MB, %lld records, %lld tokens (%lld targets)\n", mb,
              static_cast<long long>(result.documents), static_cast<long long>(result.train_tokens),
              static_cast<long long>(result.train_targets));
  std::printf("1 thread:  %.3f s (%.1f MB/s)\n", one, mb / one);
  std::printf("%d threads: %.3f s (%.1f MB/s), speed-up %.2fx, shards %s\n", threads, many,
              mb / many, one / many, same ? "identical" : "DIFFER");
  fs::remove_all(dir);
  return same ? 0 : 1;
}
