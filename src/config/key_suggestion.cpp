// Edit distance with three rolling rows (optimal string alignment needs the row before last).
#include "config/key_suggestion.h"

#include <algorithm>
#include <cctype>

namespace zero::config {
namespace {

char fold(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Lower case without spaces and separators: the key as a person means it.
std::string normalized(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, kMaxComparedChars)) {
    if (c == ' ' || c == '\t' || c == '-' || c == '_' || c == '.') continue;
    out += fold(c);
  }
  return out;
}

size_t length_gap(size_t a, size_t b) { return a > b ? a - b : b - a; }

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, kMaxComparedChars);
  b = b.substr(0, kMaxComparedChars);
  const size_t m = b.size();
  std::vector<size_t> before_last(m + 1, 0), last(m + 1, 0), row(m + 1, 0);
  for (size_t j = 0; j <= m; ++j) last[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1])) {
        row[j] = std::min(row[j], before_last[j - 2] + 1);
      }
    }
    std::swap(before_last, last);
    std::swap(last, row);
  }
  return last[m];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = static_cast<size_t>(-1);
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::optional<std::string> near_miss(std::string_view name,
                                     const std::vector<std::string>& known) {
  const std::string plain = normalized(name);
  for (const std::string& candidate : known) {
    if (!plain.empty() && plain == normalized(candidate)) return candidate;
  }
  std::optional<std::string> best;
  size_t best_distance = 3;
  for (const std::string& candidate : known) {
    // Two edits cannot bridge a larger length difference: skip the table.
    if (length_gap(name.size(), candidate.size()) > 2) continue;
    // Two edits turn short words into other words ("comment" -> "comet"): keys under 8
    // characters get one, keys of one or two characters none.
    const size_t shorter = std::min(name.size(), candidate.size());
    const size_t allowed = shorter >= 8 ? 2 : shorter >= 3 ? 1 : 0;
    const size_t distance = edit_distance(name, candidate);
    if (distance <= allowed && distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

}  // namespace zero::config
