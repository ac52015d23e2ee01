// Cutting one long text into chunks that encode independently, and running them on threads.
// Where a cut is exact is the caller's promise (hf_tokenizer.cpp checks the pipeline: see
// LineCut, Normalizer::is_local, BpeModel::is_merge_barrier); this file only finds the
// positions and runs the work.
#pragma once
#include <cstddef>
#include <exception>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

namespace zero::data::tokenizer {

// Up to `parts` chunk boundaries [0 = b0 < b1 < ... < bn = size]: each cut is the first
// position at or after an equal share where `can_cut(text, p)` holds (fewer chunks when none).
std::vector<size_t> chunk_bounds(std::string_view text, size_t parts,
                                 bool (*can_cut)(std::string_view, size_t));

// A line start LineCut promises about: "\n" after a printable non-space ASCII character,
// then an ASCII letter.
bool is_line_start_cut(std::string_view text, size_t p);
// Right after any "\n".
bool is_after_newline(std::string_view text, size_t p);

// Runs work(i) for i in [0, count), one thread each (the first on the calling thread); the
// first exception thrown is rethrown after all have finished.
void run_chunks(size_t count, const std::function<void(size_t)>& work);

}  // namespace zero::data::tokenizer
