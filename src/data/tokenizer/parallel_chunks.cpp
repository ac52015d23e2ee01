// Chunking and running; see parallel_chunks.h.
#include "data/tokenizer/parallel_chunks.h"

#include <algorithm>

namespace zero::data::tokenizer {

std::vector<size_t> chunk_bounds(std::string_view text, size_t parts,
                                 bool (*can_cut)(std::string_view, size_t)) {
  std::vector<size_t> bounds{0};
  for (size_t k = 1; k < parts; ++k) {
    size_t p = std::max(bounds.back() + 1, text.size() * k / parts);
    while (p < text.size() && !can_cut(text, p)) ++p;
    if (p >= text.size()) break;
    bounds.push_back(p);
  }
  bounds.push_back(text.size());
  return bounds;
}

bool is_line_start_cut(std::string_view text, size_t p) {
  if (p < 2 || p >= text.size() || text[p - 1] != '\n') return false;
  const unsigned char before = static_cast<unsigned char>(text[p - 2]);
  const unsigned char after = static_cast<unsigned char>(text[p]);
  const bool letter = (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z');
  return before > 0x20 && before < 0x7F && letter;
}

bool is_after_newline(std::string_view text, size_t p) {
  return p > 0 && p < text.size() && text[p - 1] == '\n';
}

void run_chunks(size_t count, const std::function<void(size_t)>& work) {
  std::vector<std::exception_ptr> errors(count);
  const auto guarded = [&](size_t i) {
    try {
      work(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t i = 1; i < count; ++i) threads.emplace_back(guarded, i);
  if (count > 0) guarded(0);
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace zero::data::tokenizer
