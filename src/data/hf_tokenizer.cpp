// HfTokenizer: the Hugging Face tokenizer pipeline (added tokens, normalizer, pre-tokenizer,
// BPE model, post-processor; decoder for the way back). See hf_tokenizer.h.
#include "data/hf_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "data/tokenizer/added_tokens.h"
#include "data/tokenizer/bpe_model.h"
#include "data/tokenizer/decoders.h"
#include "data/tokenizer/normalizers.h"
#include "data/tokenizer/parallel_chunks.h"
#include "data/tokenizer/post_processor.h"
#include "data/tokenizer/pre_tokenizers.h"
#include "data/tokenizer/tokenizer_files.h"
#include "data/tokenizer/tokenizer_json_reader.h"
#include "data/tokenizer/utf8.h"
#include "data/tokenizer/word_cache.h"
#include "io/bounded_json.h"

namespace zero::data {

using namespace tokenizer;  // NOLINT: this file is the tokenizer's front door

namespace {

// Numbers the tokenizers of this process, so a thread's word cache knows whose words it holds
// (an address could be reused by a later tokenizer; a number is not).
std::atomic<uint64_t> next_instance{1};
// Texts (or SentencePiece words) from this size on are encoded on several threads.
constexpr size_t kParallelFromBytes = 1 << 20;

// Special tokens that end a document, in the order rule 3 of hf_tokenizer.h tries them.
constexpr const char* kEosNames[] = {"<|endoftext|>", "<|end_of_text|>", "</s>",
                                     "<eos>",         "<|im_end|>",      "<|end|>"};

}  // namespace

struct HfTokenizer::Impl {
  std::string origin;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  // What decode() shows for each added token: its content, normalized for normalized=true
  // tokens (Hugging Face's id_to_token gives the normalized text, e.g. "WORLD" -> "world").
  std::vector<std::string> added_text;
  std::unordered_map<uint32_t, size_t> added_by_id;  // id -> index into `added`
  TokenIds added_ids;                                // content -> id
  std::unordered_set<std::string> special_contents;
  AddedTokenMatcher raw_matcher;         // normalized=false tokens, on the input text
  AddedTokenMatcher normalized_matcher;  // normalized=true tokens, on normalized pieces
  uint32_t id_end = 0;
  std::optional<uint32_t> eos;
  // Long texts are encoded on this many threads where the pipeline allows it exactly:
  // cut_at_line_starts (the whole text is cut at line starts, see pre_tokenizers.h LineCut) or
  // newline_is_barrier (one long word is cut after newlines).
  int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  bool cut_at_line_starts = false;
  bool newline_is_barrier = false;
  const uint64_t instance = next_instance.fetch_add(1);

  // This thread's word cache, emptied when the thread last encoded with another tokenizer.
  WordCache& thread_cache() const {
    thread_local uint64_t owner = 0;
    thread_local WordCache cache;
    if (owner != instance) {
      cache.clear();
      owner = instance;
    }
    return cache;
  }

  // Normalizes one piece of input text (between added tokens) and encodes it. `cache`: the
  // call's word cache, or nullptr for short texts.
  void encode_text(std::string_view piece, bool at_start, WordCache* cache,
                   std::vector<uint32_t>& ids) const;
  void encode_words(std::string_view text, bool at_start, WordCache* cache,
                    std::vector<uint32_t>& ids) const;
  // One pre-tokenized word: a SentencePiece line is cut after newlines (threads) and before
  // "▁" word starts (encode_long_word), every part goes through the word cache.
  void encode_word(std::string_view word, WordCache* cache, std::vector<uint32_t>& ids) const;
  void encode_long_word(std::string_view word, WordCache* cache, std::vector<uint32_t>& ids) const;
  void encode_cached(std::string_view word, WordCache* cache, std::vector<uint32_t>& ids) const;
  // The ids of `text` (no post-processing) on this thread; starts_input: `text` begins the
  // text given to encode().
  std::vector<uint32_t> encode_serial(std::string_view text, bool starts_input) const;
  // encode_chunk(chunk, is_first) for each chunk [bounds[i], bounds[i+1]) on its own thread,
  // the results concatenated.
  std::vector<uint32_t> encode_in_chunks(
      const std::vector<size_t>& bounds, std::string_view text,
      const std::function<std::vector<uint32_t>(std::string_view, bool)>& encode_chunk) const;
  std::optional<uint32_t> find_eos(const std::optional<std::string>& eos_token) const;
};


HfTokenizer::HfTokenizer(std::string_view json_text, const std::string& origin,
                         const std::optional<std::string>& eos_token)
    : impl_(std::make_unique<Impl>()) {
  Impl& t = *impl_;
  t.origin = origin;
  TokenizerJson parsed = read_tokenizer_json(json_text, origin);
  const Json& root = parsed.root;
  const JsonPath top{origin, ""};
  if (!root.is_object()) throw ConfigError(origin + ": a tokenizer.json must be a JSON object");

  const Json& model = require_field(root, "model", top);
  const JsonPath model_at = top.child("model");
  // Files written by old versions leave out the model type; BPE is then told by its merges.
  const Json* type = optional_field(model, "type");
  const std::string model_type =
      type ? (type->is_string() ? type->get<std::string>() : "?")
           : (parsed.tables.has_merges ? "BPE" : "?");
  if (model_type != "BPE") {
    unsupported_type(model_at, "model", model_type,
                     "BPE; WordPiece, Unigram and WordLevel models are not implemented");
  }
  t.model = std::make_unique<BpeModel>(model, std::move(parsed.tables), model_at);
  const auto component = [&](const char* key) -> const Json& {
    static const Json null_json;
    const Json* value = optional_field(root, key);
    return value ? *value : null_json;
  };
  t.normalizer = make_normalizer(component("normalizer"), top.child("normalizer"));
  t.pre_tokenizer = make_pre_tokenizer(component("pre_tokenizer"), top.child("pre_tokenizer"));
  t.post_processor = make_post_processor(component("post_processor"), top.child("post_processor"));
  t.decoder = make_decoder(component("decoder"), top.child("decoder"));
  t.added = parse_added_tokens(component("added_tokens"), top.child("added_tokens"));

  t.id_end = t.model->id_end();
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (size_t i = 0; i < t.added.size(); ++i) {
    AddedToken& token = t.added[i];
    // Hugging Face gives an added token whose text is in the vocabulary the vocabulary's id.
    if (const auto id = t.model->token_to_id(token.content)) token.id = *id;
    t.added_by_id.emplace(token.id, i);
    t.added_ids.emplace(token.content, token.id);
    if (token.special) t.special_contents.insert(token.content);
    t.id_end = std::max(t.id_end, token.id + 1);
    if (token.normalized) {
      // Hugging Face searches for a normalized token's content as the normalizer rewrites it.
      std::string pattern = token.content;
      if (t.normalizer) t.normalizer->normalize(pattern);
      normalized.push_back(&token);
      normalized_patterns.push_back(pattern);
      t.added_text.push_back(std::move(pattern));
    } else {
      raw.push_back(&token);
      raw_patterns.push_back(token.content);
      t.added_text.push_back(token.content);
    }
  }
  t.raw_matcher = AddedTokenMatcher(raw, raw_patterns);
  t.normalized_matcher = AddedTokenMatcher(normalized, normalized_patterns);

  if (t.post_processor) {
    std::vector<uint32_t> template_ids;
    t.post_processor->process(template_ids);
    for (const uint32_t id : template_ids) {
      if (!t.added_by_id.count(id) && !t.model->id_to_token(id)) {
        throw ConfigError(top.child("post_processor").str() + ": the special token id " +
                          std::to_string(id) + " is neither an added token nor in the vocabulary");
      }
    }
  }
  t.eos = t.find_eos(eos_token);

  // Exact parallel encoding (see Impl::threads): every stage must keep a line start a cut.
  bool added_tokens_local = true;
  for (const AddedToken& token : t.added) {
    added_tokens_local = added_tokens_local && !token.lstrip && !token.rstrip &&
                         token.content.find('\n') == std::string::npos;
  }
  t.cut_at_line_starts = added_tokens_local && (!t.normalizer || t.normalizer->is_local()) &&
                         t.pre_tokenizer && t.pre_tokenizer->line_cut() == LineCut::kCuts;
  t.newline_is_barrier = t.model->is_merge_barrier("\n");
}

HfTokenizer::~HfTokenizer() = default;

std::optional<uint32_t> HfTokenizer::Impl::find_eos(const std::optional<std::string>& eos_token) const {
  const auto id_of = [&](const std::string& content) -> std::optional<uint32_t> {
    if (const auto it = added_ids.find(content); it != added_ids.end()) return it->second;
    return model->token_to_id(content);
  };
  if (eos_token) {
    if (const auto id = id_of(*eos_token)) return id;
  }
  if (post_processor) {
    const auto trailing = post_processor->trailing_ids();
    if (!trailing.empty()) return trailing.back();
  }
  for (const char* name : kEosNames) {
    if (special_contents.count(name)) return added_ids.find(name)->second;
  }
  return std::nullopt;
}

void HfTokenizer::Impl::encode_word(std::string_view word, WordCache* cache,
                                    std::vector<uint32_t>& ids) const {
  if (newline_is_barrier && threads > 1 && word.size() >= kParallelFromBytes) {
    // A SentencePiece model sees a whole text as one word; it is cut after newlines, which
    // take part in no merge (see BpeModel::is_merge_barrier), and the parts merged apart.
    const auto bounds = chunk_bounds(word, static_cast<size_t>(threads), is_after_newline);
    const auto parts = encode_in_chunks(bounds, word, [&](std::string_view chunk, bool) {
      std::vector<uint32_t> part;
      encode_long_word(chunk, &thread_cache(), part);
      return part;
    });
    ids.insert(ids.end(), parts.begin(), parts.end());
    return;
  }
  encode_long_word(word, cache, ids);
}

void HfTokenizer::Impl::encode_long_word(std::string_view word, WordCache* cache,
                                         std::vector<uint32_t>& ids) const {
  if (word.size() <= WordCache::kMaxWordBytes || !model->splits_before_metaspace()) {
    encode_cached(word, cache, ids);
    return;
  }
  // Cut before each "▁" that follows another character: no merge joins across such a cut.
  constexpr std::string_view kMetaspace = "\xE2\x96\x81";
  size_t start = 0;
  for (size_t at = word.find(kMetaspace, 1); at != std::string_view::npos;
       at = word.find(kMetaspace, at + kMetaspace.size())) {
    if (at >= 3 && word.compare(at - 3, 3, kMetaspace) == 0) continue;
    encode_cached(word.substr(start, at - start), cache, ids);
    start = at;
  }
  encode_cached(word.substr(start), cache, ids);
}

void HfTokenizer::Impl::encode_cached(std::string_view word, WordCache* cache,
                                      std::vector<uint32_t>& ids) const {
  if (!cache) {
    model->encode_word(word, ids);
    return;
  }
  if (cache->find(word, ids)) return;
  const size_t before = ids.size();
  model->encode_word(word, ids);
  cache->insert(word, ids.data() + before, ids.size() - before);
}

void HfTokenizer::Impl::encode_words(std::string_view text, bool at_start, WordCache* cache,
                                     std::vector<uint32_t>& ids) const {
  if (text.empty()) return;
  if (!pre_tokenizer) {
    encode_word(text, cache, ids);
    return;
  }
  auto sink = [&](std::string_view word, bool) { encode_word(word, cache, ids); };
  pre_tokenizer->pre_tokenize(text, at_start, WordSink(sink));
}

void HfTokenizer::Impl::encode_text(std::string_view piece, bool at_start, WordCache* cache,
                                    std::vector<uint32_t>& ids) const {
  std::string normalized_text;
  std::string_view text = piece;
  if (normalizer) {
    normalized_text.assign(piece);
    normalizer->normalize(normalized_text);
    text = normalized_text;
  }
  if (normalized_matcher.empty()) {
    encode_words(text, at_start, cache, ids);
    return;
  }
  std::vector<Piece> pieces;
  normalized_matcher.split(text, pieces);
  for (const Piece& p : pieces) {
    if (p.is_token) {
      ids.push_back(p.id);
    } else {
      encode_words(p.text, at_start && p.text.data() == text.data(), cache, ids);
    }
  }
}

std::vector<uint32_t> HfTokenizer::Impl::encode_serial(std::string_view text,
                                                     bool starts_input) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  WordCache* cache = &thread_cache();
  if (raw_matcher.empty()) {
    encode_text(text, starts_input, cache, ids);
    return ids;
  }
  std::vector<Piece> pieces;
  raw_matcher.split(text, pieces);
  for (const Piece& piece : pieces) {
    if (piece.is_token) {
      ids.push_back(piece.id);
    } else {
      encode_text(piece.text, starts_input && piece.text.data() == text.data(), cache, ids);
    }
  }
  return ids;
}

std::vector<uint32_t> HfTokenizer::Impl::encode_in_chunks(
    const std::vector<size_t>& bounds, std::string_view text,
    const std::function<std::vector<uint32_t>(std::string_view, bool)>& encode_chunk) const {
  const size_t chunks = bounds.size() - 1;
  std::vector<std::vector<uint32_t>> parts(chunks);
  run_chunks(chunks, [&](size_t i) {
    parts[i] = encode_chunk(text.substr(bounds[i], bounds[i + 1] - bounds[i]), i == 0);
  });
  std::vector<uint32_t> ids;
  size_t total = 0;
  for (const auto& part : parts) total += part.size();
  ids.reserve(total + 8);
  for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  return ids;
}

std::vector<uint32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = first_invalid_utf8(text); bad != kValidUtf8) {
    throw ConfigError("the text to tokenize is not valid UTF-8: byte " + std::to_string(bad) +
                      " (0x" + "0123456789abcdef"[static_cast<unsigned char>(text[bad]) >> 4] +
                      "0123456789abcdef"[static_cast<unsigned char>(text[bad]) & 15] +
                      ") starts no valid UTF-8 sequence; convert the input to UTF-8 first "
                      "(e.g. with iconv)");
  }
  const Impl& t = *impl_;
  std::vector<uint32_t> ids;
  if (t.cut_at_line_starts && t.threads > 1 && text.size() >= kParallelFromBytes) {
    const auto bounds = chunk_bounds(text, static_cast<size_t>(t.threads), is_line_start_cut);
    ids = t.encode_in_chunks(bounds, text, [&](std::string_view chunk, bool first) {
      return t.encode_serial(chunk, first);
    });
  } else {
    ids = t.encode_serial(text, true);
  }
  if (add_special_tokens && t.post_processor) t.post_processor->process(ids);
  return ids;
}

void HfTokenizer::set_max_threads(int threads) { impl_->threads = std::max(1, threads); }

std::string HfTokenizer::decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* token = nullptr;
    if (const auto it = t.added_by_id.find(ids[i]); it != t.added_by_id.end()) {
      token = &t.added_text[it->second];
    } else {
      token = t.model->id_to_token(ids[i]);
    }
    if (!token) {
      throw ConfigError("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is not in the vocabulary of " + t.origin + " (ids go up to " +
                        std::to_string(t.id_end - 1) + "); were these ids made by another tokenizer?");
    }
    if (skip_special_tokens && t.special_contents.count(*token)) continue;
    tokens.push_back(*token);
  }
  std::string text;
  if (t.decoder) {
    t.decoder->decode_chain(tokens);
    for (const std::string& token : tokens) text += token;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return text;
}

int64_t HfTokenizer::vocab_size() const { return impl_->id_end; }

std::optional<uint32_t> HfTokenizer::document_separator() const { return impl_->eos; }

std::string HfTokenizer::description() const {
  return "Hugging Face tokenizer (BPE, " + std::to_string(impl_->id_end) + " ids) from " +
         impl_->origin;
}

std::optional<uint32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir_or_file) {
  TokenizerFiles files = read_tokenizer_files(dir_or_file);
  return std::make_unique<HfTokenizer>(files.json_text, files.json_path, files.eos_token);
}

}  // namespace zero::data
