// prepare_corpus: check, read, tokenize in parallel, concatenate in order, split, write.
#include "data/prepare_text.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"
#include "data/corpus_builder.h"
#include "data/parallel_for.h"
#include "data/token_shard.h"
#include "data/utf8_check.h"
#include "io/input_file.h"

namespace zero::data {
namespace {

namespace fs = std::filesystem;

// A shard's header counts tokens in an int32.
constexpr int64_t kMaxShardTokens = INT32_MAX;
// Work is handed to the pool in batches of about this much text, so the per-document token
// lists of two batches (not of the whole corpus) exist next to the concatenated result. Small
// enough that a corpus of tens of megabytes makes many batches: appending batch k overlaps
// tokenizing batch k + 1, and only the last batch's append is left on its own.
constexpr size_t kBatchBytes = size_t{4} << 20;
constexpr size_t kBatchDocuments = 4096;
// A corpus file is read whole; the shard's token limit stops far larger corpora anyway.
constexpr uint64_t kMaxCorpusFileBytes = uint64_t{1} << 40;

// Only regular files: fopen() of a FIFO blocks until a writer appears, and /dev/zero would be
// read until memory runs out. Returns the file's size.
int64_t check_readable(const std::string& path) {
  const uint64_t size = io::regular_file_size(path, "the text file to tokenize");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw FileError(path + ": cannot open the text file: " + std::strerror(errno) +
                    " (check the path)");
  }
  std::fclose(file);
  return size > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(size);
}

// An output that cannot be written is found before minutes of tokenizing, not after.
void check_writable(const std::string& path, const std::string& flag) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    throw FileError(path + ": " + flag + " names a directory; give the shard's file name");
  }
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".")
                                                                : fs::path(path).parent_path();
  if (!fs::is_directory(parent, error)) {
    throw FileError(path + ": cannot write " + flag + ": the folder " + parent.string() +
                    " does not exist (create it first)");
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw FileError(path + ": cannot write " + flag + " into " + parent.string() + ": " +
                    std::strerror(errno));
  }
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  const fs::path ca = fs::weakly_canonical(a, ec_a), cb = fs::weakly_canonical(b, ec_b);
  return a == b || (!ec_a && !ec_b && ca == cb);
}

void check_fields(const JsonlFields& fields) {
  if (!fields.text.empty() && fields.prompt_response()) {
    throw ConfigError(
        "zero prepare: --field reads one text field per record; --prompt-field and "
        "--response-field read a prompt and a response instead. Give one or the other.");
  }
  if (fields.prompt_response() && (fields.prompt.empty() || fields.response.empty())) {
    throw ConfigError(std::string("zero prepare: ") +
                      (fields.prompt.empty() ? "--response-field needs --prompt-field"
                                             : "--prompt-field needs --response-field") +
                      ": prompt/response records need both fields");
  }
}

// Runs the tokenizer with the document's place in the error, keeping internal errors as they are.
template <typename Fn>
auto with_place(const std::string& place, Fn&& fn) {
  try {
    return fn();
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    throw FileError(place + ": the tokenizer rejected the text: " + e.what());
  }
}

// Tokenizes documents [0, count) with `encode(i)` on the pool in batches and appends them in
// order; `size(i)` estimates a document's bytes for batching. Returns the tokens added. The
// append of one batch (the calling thread: it is a concatenation) runs while the pool
// tokenizes the next, so it costs no wall time beyond its share of the cores.
template <typename Size, typename Encode>
int64_t tokenize_in_order(size_t count, WorkerPool& pool, Size&& size, Encode&& encode,
                          CorpusBuilder& corpus) {
  // The end of the batch that starts at `begin`.
  const auto batch_end = [&](size_t begin) {
    size_t end = begin, bytes = 0;
    while (end < count && end - begin < kBatchDocuments && (end == begin || bytes < kBatchBytes)) {
      bytes += size(end);
      ++end;
    }
    return end;
  };
  std::vector<EncodedDocument> ready, next;
  size_t next_begin = 0;
  const std::function<void(size_t)> tokenize = [&](size_t i) { next[i] = encode(next_begin + i); };
  // Waits for a running job before `next` and `tokenize` go away, also when an append throws
  // (that error is the one reported: its document comes first).
  struct JobGuard {
    WorkerPool& pool;
    bool running = false;
    ~JobGuard() {
      if (!running) return;
      try {
        pool.wait();
      } catch (...) {  // a later batch's error: superseded by the one leaving
      }
    }
  } job{pool};

  int64_t added = 0;
  size_t begin = 0;
  while (begin < count) {
    const size_t end = batch_end(begin);
    next.assign(end - begin, EncodedDocument{});
    next_begin = begin;
    pool.start(end - begin, tokenize);
    job.running = true;
    for (const auto& document : ready) added += corpus.append(document);
    job.running = false;
    pool.wait();
    std::swap(ready, next);
    begin = end;
  }
  for (const auto& document : ready) added += corpus.append(document);
  return added;
}

// Plain text files: one document each.
void tokenize_text_files(const PrepareOptions& options, const std::vector<int64_t>& sizes,
                         const Tokenizer& tokenizer, bool any_bytes, WorkerPool& pool,
                         CorpusBuilder& corpus, PrepareResult& result) {
  const auto& inputs = options.inputs;
  // Files are batched by size like documents, so several files are tokenized at once.
  tokenize_in_order(
      inputs.size(), pool, [&](size_t i) { return static_cast<size_t>(sizes[i]); },
      [&](size_t i) {
        const std::string& path = inputs[i];
        const std::string text = io::read_text_file(path, "the text file to tokenize",
                                                    kMaxCorpusFileBytes);
        if (!any_bytes) {
          if (const auto bad = invalid_utf8_offset(text)) {
            throw FileError(path + ": invalid UTF-8 at byte offset " + std::to_string(*bad) +
                            " (line " + std::to_string(line_of_offset(text, *bad)) + "); " +
                            tokenizer.description() +
                            " reads UTF-8 text. Re-encode the file (e.g. with iconv), or use "
                            "the byte tokenizer, which takes any bytes.");
          }
        }
        return with_place(path, [&] { return EncodedDocument{tokenizer.encode(text, false), 0}; });
      },
      corpus);
  // Per-file counts from the document ends (one document per file).
  int64_t previous = 0;
  for (const int64_t end : corpus.document_ends()) {
    result.file_tokens.push_back(end - previous);
    previous = end;
  }
}

// JSONL files: one document per record.
void tokenize_jsonl_files(const PrepareOptions& options, const Tokenizer& tokenizer,
                          WorkerPool& pool, CorpusBuilder& corpus, PrepareResult& result) {
  for (const auto& path : options.inputs) {
    const std::string content =
        io::read_text_file(path, "the JSONL file to tokenize", kMaxCorpusFileBytes);
    const std::vector<JsonlLine> lines = split_jsonl_lines(content);
    const int64_t added = tokenize_in_order(
        lines.size(), pool, [&](size_t i) { return lines[i].text.size(); },
        [&](size_t i) {
          const Document document = parse_jsonl_record(lines[i], options.jsonl, path);
          return with_place(path + " line " + std::to_string(lines[i].number), [&] {
            EncodedDocument encoded;
            if (!document.prompt.empty()) encoded.tokens = tokenizer.encode(document.prompt, false);
            encoded.prompt_tokens = encoded.tokens.size();
            const std::vector<uint32_t> text = tokenizer.encode(document.text, false);
            encoded.tokens.insert(encoded.tokens.end(), text.begin(), text.end());
            return encoded;
          });
        },
        corpus);
    result.file_tokens.push_back(added);
  }
}

// Where the validation shard starts.
int64_t split_point(const CorpusBuilder& corpus, bool whole_documents, double fraction) {
  const auto total = static_cast<int64_t>(corpus.tokens().size());
  const int64_t exact =
      total - static_cast<int64_t>(std::floor(static_cast<double>(total) * fraction));
  const auto& ends = corpus.document_ends();
  if (!whole_documents || ends.size() < 2) return exact;
  // The document boundary nearest the exact cut (the last end is the corpus end: not a cut).
  int64_t best = ends.front();
  for (size_t i = 0; i + 1 < ends.size(); ++i) {
    if (std::llabs(ends[i] - exact) < std::llabs(best - exact)) best = ends[i];
  }
  return best;
}

}  // namespace

PrepareResult prepare_corpus(const PrepareOptions& options) {
  const auto& inputs = options.inputs;
  if (inputs.empty()) throw ConfigError("zero prepare: give at least one text file to tokenize");
  if (options.train_out.empty()) throw ConfigError("zero prepare: --out FILE.bin is required");
  check_fields(options.jsonl);
  if (options.threads < 0) {
    throw ConfigError("zero prepare: --threads must be >= 1 (or 0 for one per core), got " +
                      std::to_string(options.threads));
  }
  const bool split = !options.val_out.empty();
  const double fraction = options.val_fraction;
  if (split) {
    if (!(fraction > 0.0 && fraction < 1.0)) {
      throw ConfigError("zero prepare: --val-fraction must be in (0, 1) with --val-out, got " +
                        std::to_string(fraction));
    }
    if (same_file(options.train_out, options.val_out)) {
      throw ConfigError("zero prepare: --out and --val-out are the same file (" +
                        options.train_out + "); give the validation shard its own name");
    }
  }
  const bool jsonl = !options.jsonl.text.empty() || options.jsonl.prompt_response();
  const ByteTokenizer byte_tokenizer;
  const Tokenizer& tokenizer = options.tokenizer != nullptr ? *options.tokenizer : byte_tokenizer;
  const bool any_bytes = dynamic_cast<const ByteTokenizer*>(&tokenizer) != nullptr;

  // Every input is checked before any is read, so a typo in the last name fails at once; and
  // (byte tokenizer, one token per byte) inputs that cannot fit one shard are refused before
  // gigabytes are tokenized.
  int64_t total_bytes = 0;
  std::vector<int64_t> sizes;
  for (const auto& path : inputs) {
    sizes.push_back(check_readable(path));
    total_bytes = add_if_fits(total_bytes, sizes.back()).value_or(INT64_MAX);
  }
  check_writable(options.train_out, "--out");
  if (split) check_writable(options.val_out, "--val-out");
  // The larger of the two shards must fit one .bin header's count.
  const double largest_fraction = split ? std::max(fraction, 1.0 - fraction) : 1.0;
  const auto max_tokens = static_cast<int64_t>(static_cast<double>(kMaxShardTokens) / largest_fraction);
  if (any_bytes && !jsonl && total_bytes > max_tokens) {
    throw ConfigError("zero prepare: the inputs hold " + std::to_string(total_bytes) +
                      " bytes (one token each), more than one .bin shard can count (" +
                      std::to_string(kMaxShardTokens) +
                      "); prepare the files in several groups, one shard each");
  }

  const int threads = options.threads == 0 ? default_thread_count() : options.threads;
  // The byte tokenizer makes at most one token per byte; subword tokenizers about one per 4
  // bytes of English (more for other scripts: the buffers then grow as usual).
  const int64_t expected_tokens = any_bytes ? total_bytes : total_bytes / 4;
  CorpusBuilder corpus(tokenizer.document_separator(), options.jsonl.prompt_response(), max_tokens,
                       expected_tokens);
  PrepareResult result;
  WorkerPool pool(threads);
  if (jsonl) {
    tokenize_jsonl_files(options, tokenizer, pool, corpus, result);
  } else {
    tokenize_text_files(options, sizes, tokenizer, any_bytes, pool, corpus, result);
  }
  result.documents = static_cast<int64_t>(corpus.document_ends().size());
  result.masked = corpus.masked();
  result.wide = tokenizer.vocab_size() > 65536;
  const auto total = static_cast<int64_t>(corpus.tokens().size());
  if (total == 0) {
    throw ConfigError(std::string("zero prepare: the input ") +
                      (jsonl ? "records hold no text" : "files are empty") +
                      "; there is nothing to tokenize");
  }

  const int64_t train = split ? split_point(corpus, jsonl, fraction) : total;
  const int64_t val = total - train;
  // A shard needs two tokens for one (input, target) pair; fewer is certainly a mistake.
  if (split && (val < 2 || train < 2)) {
    throw ConfigError("zero prepare: --val-fraction " + std::to_string(fraction) + " of " +
                      std::to_string(total) + " tokens gives " + std::to_string(train) +
                      " training and " + std::to_string(val) +
                      " validation tokens; each shard "
                      "needs at least 2. Use more text or a different fraction.");
  }
  result.train_tokens = train;
  result.val_tokens = val;
  result.train_targets = corpus.targets(0, train);
  result.val_targets = corpus.targets(train, total);
  // All prompt, no response: such a shard trains nothing (every loss would be 0).
  if (result.masked && (result.train_targets == 0 || (split && result.val_targets == 0))) {
    throw ConfigError(std::string("zero prepare: every token of the ") +
                      (result.train_targets == 0 ? "training" : "validation") +
                      " shard is a prompt token (the responses are empty), so it has nothing "
                      "to train on; check --response-field");
  }

  auto& tokens = corpus.tokens();
  auto& mask = corpus.mask();
  const auto cut = static_cast<std::ptrdiff_t>(train);
  if (split) {
    const std::vector<uint32_t> val_tokens(tokens.begin() + cut, tokens.end());
    if (result.masked) {
      write_token_shard(options.val_out, val_tokens,
                        std::vector<uint8_t>(mask.begin() + cut, mask.end()), result.wide);
    } else {
      write_token_shard(options.val_out, val_tokens, result.wide);
    }
  }
  tokens.resize(static_cast<size_t>(train));
  if (result.masked) {
    mask.resize(static_cast<size_t>(train));
    write_token_shard(options.train_out, tokens, mask, result.wide);
  } else {
    write_token_shard(options.train_out, tokens, result.wide);
  }
  return result;
}

PrepareResult prepare_text_files(const std::vector<std::string>& inputs,
                                 const std::string& train_out, const std::string& val_out,
                                 double val_fraction) {
  PrepareOptions options;
  options.inputs = inputs;
  options.train_out = train_out;
  options.val_out = val_out;
  options.val_fraction = val_fraction;
  return prepare_corpus(options);
}

}  // namespace zero::data
