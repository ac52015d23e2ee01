// tokenizer.json pre-tokenizers; see pre_tokenizers.h.
#include "data/tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/metaspace.h"
#include "data/tokenizer/split_regex.h"

namespace zero::data::tokenizer {
namespace {

// GPT-2's word pattern, which the ByteLevel pre-tokenizer applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The split patterns of Llama 3 and Qwen2/2.5/3 (GPT-4's cl100k style), shown to end a word at
// every line start (see LineCut): the "\n" there is matched on its own or closes a
// `[^\s\p{L}\p{N}]+[\r\n]*` / `\s*[\r\n]+` match, none of which looks past it, and no
// alternative looks behind the letter after it. GPT-2's pattern likewise: its "\n" after a
// non-space is matched alone by \s+(?!\S) or \s+.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What happens to the matched delimiters (Hugging Face's SplitDelimiterBehavior).
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const Json& spec, const JsonPath& at) {
  const std::string name = string_field(spec, "behavior", at);
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  throw ConfigError(at.child("behavior").str() + ": unknown split behavior \"" + name +
                    "\" (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                    "Contiguous)");
}

// A run of the text: a match of the pattern (is_match) or the gap between two.
struct Segment {
  size_t begin, end;
  bool is_match;
};

// Emits the words `segments` (which cover `text` in order) make under `behavior`, the way
// Hugging Face's NormalizedString::split does; empty words are dropped.
void emit_split(std::string_view text, bool at_start, const std::vector<Segment>& segments,
                Behavior behavior, const WordSink& emit) {
  // is_match in `kept` means "remove".
  std::vector<Segment> kept;
  kept.reserve(segments.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (auto s : segments) kept.push_back({s.begin, s.end, false});
      break;
    case Behavior::kRemoved:
      kept = segments;
      break;
    case Behavior::kContiguous:
      for (const auto& s : segments) {
        if (s.is_match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : segments) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const auto& s = segments[i];
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().begin = s.begin;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const auto& s : kept) {
    if (s.is_match || s.end == s.begin) continue;
    emit(text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0);
  }
}

// The matches `find` reports plus the gaps between them, covering [0, size).
template <typename Find>
std::vector<Segment> segments_of(size_t size, bool invert, Find&& find) {
  std::vector<Segment> segments;
  size_t previous = 0;
  find([&](size_t start, size_t end) {
    if (previous != start) segments.push_back({previous, start, invert});
    segments.push_back({start, end, !invert});
    previous = end;
  });
  if (previous != size) segments.push_back({previous, size, invert});
  return segments;
}

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_unique<SplitRegex>(kGpt2Pattern, "ByteLevel") : nullptr) {}

  LineCut line_cut() const override {
    if (add_prefix_space_) return LineCut::kUnknown;
    return regex_ ? LineCut::kCuts : LineCut::kTransparent;
  }

  void pre_tokenize(std::string_view input, bool at_start, const WordSink& emit) const override {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
    std::string prefixed;
    std::string_view text = input;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      prefixed = " ";
      prefixed += input;
      text = prefixed;
    }
    std::string word;
    const auto emit_mapped = [&](size_t begin, size_t end, bool starts) {
      if (end == begin) return;
      word.clear();
      alphabet.encode(text.substr(begin, end - begin), word);
      emit(word, starts);
    };
    if (!regex_) {
      emit_mapped(0, text.size(), at_start);
      return;
    }
    // Isolated: every match and every gap is a word of its own.
    size_t previous = 0;
    regex_->for_each_match(text, [&](size_t start, size_t end) {
      emit_mapped(previous, start, at_start && previous == 0);
      emit_mapped(start, end, at_start && start == 0);
      previous = end;
    });
    emit_mapped(previous, text.size(), at_start && previous == 0);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitRegex> regex_;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert, const JsonPath& at)
      : pattern_(std::move(pattern)),
        regex_(pattern_.is_literal
                   ? nullptr
                   : std::make_unique<SplitRegex>(pattern_.text, at.child("pattern").str())),
        behavior_(behavior),
        invert_(invert) {}

  LineCut line_cut() const override {
    const bool known = !pattern_.is_literal &&
                       (pattern_.text == kLlama3Pattern || pattern_.text == kQwen2Pattern ||
                        pattern_.text == kGpt2Pattern);
    return known && behavior_ == Behavior::kIsolated && !invert_ ? LineCut::kCuts
                                                                 : LineCut::kUnknown;
  }

  void pre_tokenize(std::string_view text, bool at_start, const WordSink& emit) const override {
    // The common case, Isolated and not inverted, needs no segment list.
    if (regex_ && behavior_ == Behavior::kIsolated) {
      size_t previous = 0;
      regex_->for_each_match(text, [&](size_t start, size_t end) {
        if (start > previous) emit(text.substr(previous, start - previous), at_start && previous == 0);
        if (end > start) emit(text.substr(start, end - start), at_start && start == 0);
        previous = end;
      });
      if (text.size() > previous) emit(text.substr(previous), at_start && previous == 0);
      return;
    }
    const auto segments = segments_of(text.size(), invert_, [&](auto&& on_match) {
      if (regex_) {
        regex_->for_each_match(text, on_match);
      } else if (!pattern_.text.empty()) {
        size_t from = 0, hit;
        while ((hit = text.find(pattern_.text, from)) != std::string::npos) {
          on_match(hit, hit + pattern_.text.size());
          from = hit + pattern_.text.size();
        }
      }
    });
    emit_split(text, at_start, segments, behavior_, emit);
  }

 private:
  Pattern pattern_;
  std::unique_ptr<SplitRegex> regex_;
  Behavior behavior_;
  bool invert_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  explicit MetaspacePreTokenizer(MetaspaceOptions options) : options_(std::move(options)) {}

  void pre_tokenize(std::string_view input, bool at_start, const WordSink& emit) const override {
    const std::string& r = options_.replacement;
    std::string text;
    text.reserve(input.size() + input.size() / 2 + r.size());
    for (const char c : input) {
      if (c == ' ') {
        text += r;
      } else {
        text += c;
      }
    }
    const bool starts_with_replacement = text.compare(0, r.size(), r) == 0;
    if (!starts_with_replacement &&
        (options_.prepend_scheme == PrependScheme::kAlways ||
         (options_.prepend_scheme == PrependScheme::kFirst && at_start))) {
      text.insert(0, r);
    }
    if (!options_.split) {
      if (!text.empty()) emit(text, at_start);
      return;
    }
    // Every replacement character starts a new word (MergedWithNext).
    const auto segments = segments_of(text.size(), false, [&](auto&& on_match) {
      size_t from = 0, hit;
      while ((hit = text.find(r, from)) != std::string::npos) {
        on_match(hit, hit + r.size());
        from = hit + r.size();
      }
    });
    emit_split(text, at_start, segments, Behavior::kMergedWithNext, emit);
  }

 private:
  MetaspaceOptions options_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  // Cuts when the first step cuts on the raw text and no later step breaks the promise.
  LineCut line_cut() const override {
    if (steps_.empty()) return LineCut::kTransparent;
    if (steps_[0]->line_cut() != LineCut::kCuts) return LineCut::kUnknown;
    for (const auto& step : steps_) {
      if (step->line_cut() == LineCut::kUnknown) return LineCut::kUnknown;
    }
    return LineCut::kCuts;
  }

  void pre_tokenize(std::string_view text, bool at_start, const WordSink& emit) const override {
    run(0, text, at_start, emit);
  }

 private:
  void run(size_t step, std::string_view text, bool at_start, const WordSink& emit) const {
    if (step == steps_.size()) {
      emit(text, at_start);
      return;
    }
    auto next = [&](std::string_view word, bool starts) { run(step + 1, word, starts, emit); };
    steps_[step]->pre_tokenize(text, at_start, WordSink(next));
  }
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec, const JsonPath& at) {
  if (spec.is_null()) return nullptr;
  const std::string type = type_field(spec, at);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(bool_field(spec, "add_prefix_space", at, true),
                                                   bool_field(spec, "use_regex", at, true));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(pattern_field(spec, "pattern", at),
                                               parse_behavior(spec, at),
                                               bool_field(spec, "invert", at, false), at);
  }
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(parse_metaspace(spec, at));
  if (type == "Sequence") {
    const Json& list = require_field(spec, "pretokenizers", at);
    if (!list.is_array()) throw ConfigError(at.child("pretokenizers").str() + " must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_pre_tokenizer(list[i], at.child("pretokenizers").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  unsupported_type(at, "pre-tokenizer", type, "ByteLevel, Split, Metaspace, Sequence");
}

}  // namespace zero::data::tokenizer
