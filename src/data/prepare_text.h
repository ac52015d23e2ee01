// Text and JSONL corpora -> token shards: the library side of `zero prepare`, kept here so it is
// testable without the command line.
//
// Documents: each plain text file is one document; with JSONL input (any field set in
// PrepareOptions::jsonl) each record is one. Every document is followed by the tokenizer's
// document_separator() (its EOS) when it has one; the byte tokenizer has none, so documents are
// simply concatenated. Prompt/response records become prompt tokens, then response tokens, then
// the separator; the prompt and the response are encoded separately (no merge across the
// boundary, so the mask boundary is exact) without special tokens. Prompt/response input writes
// a shard with a loss mask (data/token_shard.h, magic 20261125): the prompt tokens are 0 (not
// trained on), the response and the separator after it are 1. Other input writes llm.c shards.
//
// Documents are tokenized on several threads (a text file is one document, so a single huge
// file is tokenized by one thread); the shards are byte-identical whatever the thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/jsonl_documents.h"
#include "data/tokenizer.h"

namespace zero::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // text or JSONL files, in order
  std::string train_out;            // the training shard (.bin)
  std::string val_out;              // empty: no validation shard
  double val_fraction = 0.1;        // in (0, 1); used only with val_out
  JsonlFields jsonl;                // no field set: the inputs are plain text files
  const Tokenizer* tokenizer = nullptr;  // not owned; null: the byte tokenizer
  // Tokenizing threads (0: default_thread_count()); the calling thread concatenates their
  // output beside them.
  int threads = 0;
};

struct PrepareResult {
  std::vector<int64_t> file_tokens;  // tokens per input file (separators included), in order
  int64_t documents = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t train_targets = 0;  // tokens that are training targets (= tokens without a mask)
  int64_t val_targets = 0;
  bool masked = false;  // the shards carry a loss mask (prompt/response input)
  bool wide = false;    // uint32 tokens: the tokenizer's vocabulary exceeds 65,536
};

// Tokenizes `options.inputs` and writes `train_out`. With `val_out`, about val_fraction of the
// tokens from the end go to `val_out` instead: for text files the last floor(total x fraction)
// tokens (a cut inside the last file is fine), for JSONL whole records — the record boundary
// nearest to that cut, so no prompt/response pair is split (with one record, the exact cut).
// Both shards are written atomically; nothing is written when anything fails.
//
// Throws FileError naming: a missing or unreadable input, or an output in a missing or
// unwritable folder (all checked before anything is read); a JSONL record that is not a JSON
// object with the fields (file and line, see jsonl_documents.h); text that is not valid UTF-8
// for a tokenizer other than the byte tokenizer (file, byte offset and line; the byte tokenizer
// takes any bytes). Throws ConfigError for no inputs, no train_out, a bad fraction, the same
// path for both outputs, JSONL fields that are neither one text field nor a prompt and a
// response field, no tokens at all, a split that leaves either shard without one training pair,
// a shard whose tokens are all masked, or more tokens than one shard can count (2^31 - 1).
PrepareResult prepare_corpus(const PrepareOptions& options);

// Text files with the byte tokenizer (the original `zero prepare`): prepare_corpus with only
// these options set.
PrepareResult prepare_text_files(const std::vector<std::string>& inputs,
                                 const std::string& train_out, const std::string& val_out,
                                 double val_fraction);

}  // namespace zero::data
