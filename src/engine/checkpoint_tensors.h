// CheckpointTensors: reads pieces of a checkpoint's logical tensors — a parameter's fp32 master
// values or one of its optimizer states — whatever layout wrote them: the whole-tensor files of
// ZeRO stage 0 or the per-rank pieces of stages 1-3 at any world size. This is what lets a
// checkpoint saved at N ranks and stage S load at M ranks and stage T (DeepSpeed's "universal
// checkpoint"), and `zero convert` consolidate a ZeRO checkpoint.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors_reader.h"

namespace zero::engine {

struct EngineState;

class CheckpointTensors {
 public:
  // `folder` is DIR/<tag>; `state` its validated engine_state.json (read_engine_state). Opens
  // (memory-maps) every tensor file the state implies and checks each tensor against the
  // parameter manifest: a known parameter and optimizer state, f32, and a shape (stage 0) or
  // element range (stages 1-3) inside the parameter. Throws FileError naming the file and tensor.
  CheckpointTensors(const std::string& folder, const EngineState& state);

  // Copies elements [offset, offset + count) of the logical tensor (`state` empty: the
  // parameter's values; else e.g. "exp_avg") into `dst` as f32. Throws FileError when the
  // checkpoint lacks the tensor or some of those elements (a missing shard file), and when a
  // value is not finite (naming the tensor, the element and the file).
  void read(const std::string& param, const std::string& state, int64_t offset, int64_t count,
            float* dst) const;

 private:
  struct Piece {
    int64_t offset = 0;
    int64_t count = 0;
    size_t file = 0;
    std::string key;
    // The largest offset + count of this piece and those before it (sorted by offset): a
    // monotonic key, so a read finds its first piece by binary search. A tensor-parallel
    // checkpoint holds a piece per row of each row-parallel part, and every rank reads row by row.
    int64_t reach = 0;
  };
  std::string folder_;
  std::vector<io::SafetensorsFile> files_;
  // (parameter, state) -> pieces sorted by offset.
  std::map<std::pair<std::string, std::string>, std::vector<Piece>> pieces_;
};

// The key a ZeRO shard file stores a piece under: "<param>@<offset>" or
// "<param>@<offset>.<state>".
std::string shard_piece_key(const std::string& param, int64_t offset, const std::string& state);
std::string shard_file_name(int rank, int world_size);

}  // namespace zero::engine
