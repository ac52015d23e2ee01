#include "engine/checkpoint_tensors.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/finite_check.h"
#include "core/parse_number.h"
#include "core/tensor.h"
#include "engine/engine_state.h"

namespace zero::engine {
namespace fs = std::filesystem;

std::string shard_piece_key(const std::string& param, int64_t offset, const std::string& state) {
  std::string key = param + "@" + std::to_string(offset);
  if (!state.empty()) key += "." + state;
  return key;
}

std::string shard_file_name(int rank, int world_size) {
  return "zero_shard_" + std::to_string(rank) + "_of_" + std::to_string(world_size) +
         ".safetensors";
}

namespace {

struct PieceKey {
  std::string param;
  int64_t offset = 0;
  std::string state;
};

// Splits "<param>@<offset>[.<state>]"; nothing when `key` is not of that form. Parameter names
// contain dots, offsets do not, so the state is whatever follows the first dot after '@'.
std::optional<PieceKey> parse_piece_key(const std::string& key) {
  const size_t at = key.rfind('@');
  if (at == std::string::npos || at == 0) return std::nullopt;
  const size_t dot = key.find('.', at);
  const std::string digits =
      key.substr(at + 1, dot == std::string::npos ? std::string::npos : dot - at - 1);
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!all_digits) return std::nullopt;
  const std::optional<int64_t> offset = parse_int64(digits);  // nothing past int64
  if (!offset) return std::nullopt;
  return PieceKey{key.substr(0, at), *offset,
                  dot == std::string::npos ? "" : key.substr(dot + 1)};
}

[[noreturn]] void bad_tensor(const io::SafetensorsFile& file, const std::string& key,
                             const std::string& problem) {
  throw FileError(file.path() + ": tensor '" + key + "' " + problem +
                  "; the checkpoint is damaged or mixes files of different runs");
}

}  // namespace

CheckpointTensors::CheckpointTensors(const std::string& folder, const EngineState& state)
    : folder_(folder) {
  const fs::path dir(folder);
  for (const std::string& name : state.tensor_files()) {
    files_.push_back(io::SafetensorsFile::open((dir / name).string()));
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const auto& entry : files_[f].entries()) {
      if (entry.dtype != DType::kF32) {
        bad_tensor(files_[f], entry.name, std::string("is ") + dtype_name(entry.dtype) +
                                              "; checkpoints hold f32 tensors");
      }
      Piece piece{0, shape_numel(entry.shape), f, entry.name};
      std::string param = entry.name;
      std::string state_name;
      if (state.zero_stage == 0) {
        if (f == 1) {
          // optimizer.safetensors: "<param>.<state>"; the state is the last dotted component.
          const size_t dot = entry.name.rfind('.');
          if (dot == std::string::npos) bad_tensor(files_[f], entry.name, "is not <parameter>.<state>");
          param = entry.name.substr(0, dot);
          state_name = entry.name.substr(dot + 1);
        }
        const ManifestEntry* p = state.find_parameter(param);
        if (p == nullptr) bad_tensor(files_[f], entry.name, "is not a parameter of the manifest in " + state.source);
        if (entry.shape != p->shape) {
          bad_tensor(files_[f], entry.name, "has shape " + shape_to_string(entry.shape) + ", the manifest says " +
                                                shape_to_string(p->shape));
        }
      } else {
        const std::optional<PieceKey> key = parse_piece_key(entry.name);
        if (!key) bad_tensor(files_[f], entry.name, "is not a shard piece <parameter>@<offset>[.<state>]");
        param = key->param;
        state_name = key->state;
        piece.offset = key->offset;
        const ManifestEntry* p = state.find_parameter(param);
        if (p == nullptr) bad_tensor(files_[f], entry.name, "is not a parameter of the manifest in " + state.source);
        const std::optional<int64_t> end = add_if_fits(piece.offset, piece.count);
        if (entry.shape.size() != 1 || !end || *end > p->numel) {
          bad_tensor(files_[f], entry.name, "with shape " + shape_to_string(entry.shape) +
                                                " does not fit inside '" + param + "' (" +
                                                std::to_string(p->numel) + " elements)");
        }
      }
      if (!state_name.empty() && !state.has_state_name(state_name)) {
        bad_tensor(files_[f], entry.name, "holds optimizer state '" + state_name +
                                              "', which optimizer.state_names in " + state.source +
                                              " does not list");
      }
      pieces_[{param, state_name}].push_back(std::move(piece));
    }
  }
  for (auto& [key, list] : pieces_) {
    std::sort(list.begin(), list.end(),
              [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    int64_t reach = 0;
    for (Piece& piece : list) {
      reach = std::max(reach, piece.offset + piece.count);  // checked against the parameter
      piece.reach = reach;
    }
  }
}

void CheckpointTensors::read(const std::string& param, const std::string& state, int64_t offset,
                             int64_t count, float* dst) const {
  const auto it = pieces_.find({param, state});
  const std::string what = "'" + param + "'" + (state.empty() ? "" : " (" + state + ")");
  if (it == pieces_.end()) throw FileError(folder_ + ": the checkpoint has no tensor " + what);
  int64_t covered_to = offset;
  // Pieces before the first whose reach passes `offset` end at or before it; pieces from the
  // first that starts at or after the range's end on cannot overlap it.
  const std::vector<Piece>& list = it->second;
  const auto first = std::partition_point(list.begin(), list.end(),
                                          [&](const Piece& piece) { return piece.reach <= offset; });
  for (auto at = first; at != list.end() && at->offset < offset + count; ++at) {
    const Piece& piece = *at;
    // Piece ranges were checked against the parameter's size, so these sums fit.
    const int64_t lo = std::max(offset, piece.offset);
    const int64_t hi = std::min(offset + count, piece.offset + piece.count);
    if (lo >= hi) continue;
    if (lo > covered_to) break;  // a gap: reported below
    const io::SafetensorsFile& file = files_[piece.file];
    const Tensor source = file.tensor(piece.key);
    float* out = dst + (lo - offset);
    std::memcpy(out, source.data<float>() + (lo - piece.offset),
                static_cast<size_t>(hi - lo) * sizeof(float));
    if (const std::optional<int64_t> bad = first_non_finite(out, DType::kF32, hi - lo)) {
      const float value = out[*bad];
      throw FileError(file.path() + ": tensor '" + piece.key + "' holds " +
                      (std::isnan(value) ? "NaN" : "an infinity") + " at element " +
                      std::to_string(lo + *bad) + " of " + what +
                      "; the checkpoint is damaged, or training had diverged when it was saved: "
                      "resume from an earlier checkpoint");
    }
    covered_to = std::max(covered_to, hi);
  }
  if (covered_to < offset + count) {
    throw FileError(folder_ + ": the checkpoint lacks elements " + std::to_string(covered_to) +
                    ".." + std::to_string(offset + count) + " of " + what +
                    " (a shard file missing or from another run?)");
  }
}

}  // namespace zero::engine
