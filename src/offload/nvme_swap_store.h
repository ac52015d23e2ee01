// NvmeSwapStore: ZeRO-Infinity's optimizer-state swap. A set of named flat f32 tensors of `numel`
// elements each (e.g. "master", "exp_avg", "exp_avg_sq": one rank's partition of each) lives in
// files under `nvme_path/zero_swap/rank<r>/` (`<name>.swp`), cut into sub-groups of
// `sub_group_elements` elements (DeepSpeed's zero_optimization.sub_group_size). The optimizer
// step visits the sub-groups one at a time through for_each_sub_group(); only the staging
// buffers are ever in host memory.
//
// File layout: sub-group g of a tensor starts at byte g * stride, stride = sub_group_elements * 4
// rounded up to the O_DIRECT alignment (4 KiB or the file system's block size); each sub-group's
// last block is padded (zeros from write_all). Files are sized at construction (sparse: a tensor
// never written reads as zeros) and removed, with the rank folder, by the destructor. One store
// per folder: a second one (another job with the same nvme_path and rank) is a ConfigError, as
// it would truncate the first one's files.
//
// Staging buffers (buffer_count), DeepSpeed's meaning: each buffer holds ONE swapped tensor of
// ONE sub-group, so a config costs buffer_count * sub_group * 4 bytes of pinned memory, as in
// DeepSpeed ("at least the number of states per parameter"); counting a buffer as a whole
// sub-group of every tensor would cost tensor_count times that for the same config. A slot holds
// one sub-group of every named tensor, so there are buffer_count / tensor_count slots (never more
// than there are sub-groups):
//  * buffer_count < tensor_count: ConfigError (no sub-group fits);
//  * pipeline_read or pipeline_write with fewer than 2 slots: ConfigError naming buffer_count and
//    the value needed (2 slots; 3 let reading the next, updating the current and writing the
//    previous sub-group all overlap). Refusing beats silently running serial: the user asked for
//    overlap and would otherwise not learn why it is missing.
//
// Pipelining (for_each_sub_group):
//  * pipeline_read: the next sub-group's read is issued before fn runs on the current one;
//  * pipeline_write: the current sub-group's write is issued and only waited for when its slot is
//    needed again (or at the end of the sweep); off, each write completes before the next step.
//  Both off: read, fn, write, one sub-group at a time. The results are the same bits either way;
//  only the overlap changes.
//
// Errors: a missing or unwritable nvme_path is a ConfigError naming
// zero_optimization.offload_optimizer.nvme_path and the path; I/O failures (a short read of a
// truncated file, a full disk) and blocks whose checksum changed (verify_checksums) are
// FileErrors naming the file, the offset and the cause. When one is thrown every request in
// flight has completed and the store is usable again, but the sweep stopped part-way: sub-groups
// before the failure hold updated state, the rest the old one (the caller restores a checkpoint).
//
// Thread rules: one thread uses a store at a time (the I/O runs on the engine's own threads).
// The host views passed to fn are valid only during that call.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/aio_config.h"
#include "config/offload_config.h"
#include "core/allocator.h"
#include "core/tensor.h"
#include "offload/aio_engine.h"
#include "offload/aio_file.h"
#include "offload/swap_folder.h"

namespace zero::offload {

struct NvmeSwapStoreOptions {
  std::filesystem::path nvme_path;  // must exist and be writable
  int rank = 0;
  std::vector<std::string> tensor_names;  // distinct, non-empty, [A-Za-z0-9_.-] only
  int64_t numel = 0;                      // elements of each tensor (f32)
  int64_t sub_group_elements = 1'000'000'000;
  int64_t buffer_count = 4;  // staging buffers, one tensor of one sub-group each (DeepSpeed)
  bool pipeline_read = false;
  bool pipeline_write = false;
  AioEngineOptions aio;
  // Keep a checksum of every (tensor, sub-group) block written and check it on every read
  // (swap_checksum.h): a block changed on disk behind zero.cpp's back is a FileError instead of
  // silently wrong state. Costs one pass over the bytes in host memory per transfer.
  bool verify_checksums = true;
  WarningSink warn;  // the O_DIRECT fallback warning; empty: stderr
  // Optional: told of each step of the schedule, in order, on the calling thread: "read_issued",
  // "read_done", "update" (before fn), "write_issued", "write_done", with the sub-group index
  // (for tests of the overlap, and for tracing). write_all/read_all report their I/O too.
  std::function<void(std::string_view event, int64_t sub_group)> on_event;

  // The options DeepSpeed's config gives (validate_nvme_offload runs first): offload's
  // nvme_path, buffer_count and pipeline flags, the aio block, and zero_optimization.
  // sub_group_size.
  static NvmeSwapStoreOptions from_config(const config::AioConfig& aio,
                                          const config::OffloadOptimizerConfig& offload,
                                          int64_t sub_group_size, int rank,
                                          std::vector<std::string> tensor_names, int64_t numel);
};

class NvmeSwapStore {
 public:
  // fn(sub_group_index, element_begin, element_count, views): views[i] is an f32 host tensor of
  // element_count elements holding elements [element_begin, element_begin + element_count) of
  // tensor_names[i]; fn updates them in place.
  using SubGroupFn = std::function<void(int64_t sub_group, int64_t element_begin, int64_t element_count,
                                        std::span<Tensor> views)>;

  // Creates the folder and the files, and the staging buffers from `staging_allocator` (the
  // backend's pinned host allocator; category kOptimizer). Throws as described above.
  NvmeSwapStore(const NvmeSwapStoreOptions& options, Allocator& staging_allocator);
  ~NvmeSwapStore();  // waits for I/O in flight, frees the buffers, removes the files
  NvmeSwapStore(const NvmeSwapStore&) = delete;
  NvmeSwapStore& operator=(const NvmeSwapStore&) = delete;

  const NvmeSwapStoreOptions& options() const { return options_; }
  const std::filesystem::path& directory() const { return directory_; }
  std::filesystem::path file_path(std::string_view tensor_name) const;
  int64_t sub_group_count() const { return sub_groups_; }
  int64_t staging_slots() const { return static_cast<int64_t>(slots_.size()); }
  int64_t staging_bytes() const;  // pinned bytes held for staging
  bool direct_io() const;         // O_DIRECT in use (false: the buffered fallback)
  AioEngineStats io_stats() const { return engine_.stats(); }

  // Replaces the whole of `tensor_name` with `source` (numel elements). ConfigError for an
  // unknown name, ShapeError for a wrong length.
  void write_all(std::string_view tensor_name, std::span<const float> source);
  // Copies the whole of `tensor_name` into `destination` (numel elements), e.g. for checkpoints.
  void read_all(std::string_view tensor_name, std::span<float> destination);
  // One pass over every sub-group in order 0, 1, ...: read, fn, write back (pipelined as set).
  void for_each_sub_group(const SubGroupFn& fn);

 private:
  struct Slot {
    char* data = nullptr;  // aligned; tensor i at data + i * stride_bytes_
    std::vector<AioEngine::Ticket> tickets;
    bool busy = false;  // I/O in flight
    bool writing = false;
    int64_t sub_group = -1;       // of the I/O in flight
    std::vector<size_t> tensors;  // which tensors it moves
  };

  void create_files_and_staging(int64_t slots_allowed);
  void remove_files_and_unlock() noexcept;
  size_t tensor_index(std::string_view tensor_name) const;
  int64_t sub_group_begin(int64_t g) const { return g * sub_group_elements_; }
  int64_t sub_group_elements(int64_t g) const;
  int64_t sub_group_io_bytes(int64_t g) const;  // bytes moved per tensor (padded)
  int64_t sub_group_offset(int64_t g) const { return g * stride_bytes_; }
  char* slot_tensor(const Slot& slot, size_t tensor) const {
    return slot.data + static_cast<int64_t>(tensor) * stride_bytes_;
  }
  void issue(Slot& slot, int64_t g, bool write, std::span<const size_t> tensors);
  void finish(Slot& slot);  // waits for the slot's I/O; rethrows the first failure after all
  void verify_read(const Slot& slot) const;  // FileError where a block's checksum differs
  void abandon_in_flight() noexcept;
  void emit(std::string_view event, int64_t g) const {
    if (options_.on_event) options_.on_event(event, g);
  }

  NvmeSwapStoreOptions options_;
  Allocator& allocator_;
  std::filesystem::path directory_;
  int64_t sub_group_elements_ = 0;
  int64_t sub_groups_ = 0;
  int64_t stride_bytes_ = 0;
  int64_t alignment_ = 4096;
  std::vector<std::unique_ptr<AioFile>> files_;  // one per tensor name
  std::vector<Slot> slots_;
  // Checksum of block (tensor t, sub-group g) at t * sub_groups_ + g, valid where written.
  std::vector<uint64_t> checksums_;
  std::vector<char> checksum_known_;
  std::unique_ptr<SwapFolder> folder_;  // the rank folder, locked: one store per folder
  void* staging_ = nullptr;  // the allocator's block; slots are aligned inside it
  size_t staging_allocation_ = 0;
  AioEngine engine_;  // last member: destroyed first, after its requests have finished
};

}  // namespace zero::offload
