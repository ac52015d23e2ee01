// "Did you mean ...": the closest known key to a misspelt one, by edit distance, and the rule for
// when an unknown key is so close to a known one that it must be a typo. Both are bounded in
// cost: names longer than kMaxComparedChars are compared by their first kMaxComparedChars, so a
// megabyte-long key costs no more than a normal one.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zero::config {

// No DeepSpeed key or choice is longer than this.
inline constexpr size_t kMaxComparedChars = 128;

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions, the commonest
// typo: "stgae" is one edit from "stage"). Case-insensitive. Compares at most the first
// kMaxComparedChars of each.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`; ties go to the earliest candidate. Empty when there are none.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

// The known key `name` is a near miss of: equal once case, spaces, '-', '_' and '.' are ignored
// ("Gradient_Accumulation_Steps ", "train-batch-size"), or within edit distance 2 of a key of 8
// or more characters (1 under 8, 0 under 3: two edits turn "comment" into "comet", a real
// foreign key into a known one). Nothing when none is that close.
std::optional<std::string> near_miss(std::string_view name,
                                     const std::vector<std::string>& known);

}  // namespace zero::config
