// NvmeSwapStore: files, staging slots and the pipelined sweep over sub-groups.
#include "offload/nvme_swap_store.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <optional>
#include <system_error>

#include "core/check.h"
#include "core/error.h"
#include "offload/nvme_offload_validation.h"
#include "offload/swap_checksum.h"

namespace zero::offload {
namespace {

constexpr const char* kNvmePathKey = "zero_optimization.offload_optimizer.nvme_path";
constexpr const char* kBufferCountKey = "zero_optimization.offload_optimizer.buffer_count";
constexpr int64_t kFloatBytes = 4;

bool valid_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

NvmeSwapStoreOptions NvmeSwapStoreOptions::from_config(const config::AioConfig& aio,
                                                       const config::OffloadOptimizerConfig& offload,
                                                       int64_t sub_group_size, int rank,
                                                       std::vector<std::string> tensor_names, int64_t numel) {
  validate_nvme_offload(aio, offload);
  NvmeSwapStoreOptions o;
  o.nvme_path = offload.nvme_path.value_or("");
  o.rank = rank;
  o.tensor_names = std::move(tensor_names);
  o.numel = numel;
  o.sub_group_elements = sub_group_size;
  o.buffer_count = offload.buffer_count;
  o.pipeline_read = offload.pipeline_read;
  o.pipeline_write = offload.pipeline_write;
  o.aio = AioEngineOptions::from_config(aio);
  return o;
}

NvmeSwapStore::NvmeSwapStore(const NvmeSwapStoreOptions& options, Allocator& staging_allocator)
    : options_(options), allocator_(staging_allocator), engine_(options.aio) {
  ZERO_CHECK(options.numel >= 0 && options.rank >= 0, "NvmeSwapStore numel " << options.numel << ", rank "
                                                                             << options.rank);
  if (options.sub_group_elements <= 0) {
    throw ConfigError("zero_optimization.sub_group_size must be positive for NVMe offload, got " +
                      std::to_string(options.sub_group_elements));
  }
  if (options.tensor_names.empty()) throw ConfigError("NvmeSwapStore needs at least one tensor name");
  for (size_t i = 0; i < options.tensor_names.size(); ++i) {
    const std::string& name = options.tensor_names[i];
    if (!valid_name(name)) {
      throw ConfigError("NVMe swap tensor name \"" + name + "\" is not usable as a file name "
                        "(letters, digits, '_', '.', '-')");
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.tensor_names[j] == name) throw ConfigError("NVMe swap tensor name \"" + name + "\" repeats");
    }
  }
  const auto tensors = static_cast<int64_t>(options.tensor_names.size());
  if (options.buffer_count < tensors) {
    throw ConfigError(std::string(kBufferCountKey) + " is " + std::to_string(options.buffer_count) +
                      " but the NVMe swap moves " + std::to_string(tensors) + " tensors per sub-group (" +
                      joined(options.tensor_names) + ") and each buffer holds one of them, as in DeepSpeed: "
                      "set it to at least " + std::to_string(tensors));
  }
  const int64_t slots_allowed = options.buffer_count / tensors;
  if ((options.pipeline_read || options.pipeline_write) && slots_allowed < 2) {
    throw ConfigError(std::string(kBufferCountKey) + " is " + std::to_string(options.buffer_count) +
                      ": pipeline_read/pipeline_write keep two sub-groups of the " + std::to_string(tensors) +
                      " swapped tensors in staging buffers, so set it to at least " +
                      std::to_string(2 * tensors) + " (" + std::to_string(3 * tensors) +
                      " lets reading the next, updating the current and writing the previous sub-group "
                      "overlap), or turn pipelining off");
  }

  folder_ = std::make_unique<SwapFolder>(options.nvme_path, "zero_swap", options.rank, kNvmePathKey);
  directory_ = folder_->directory();

  try {
    create_files_and_staging(slots_allowed);
  } catch (...) {
    remove_files_and_unlock();  // the destructor will not run
    throw;
  }
}

void NvmeSwapStore::create_files_and_staging(int64_t slots_allowed) {
  const NvmeSwapStoreOptions& options = options_;
  const auto tensors = static_cast<int64_t>(options.tensor_names.size());
  sub_group_elements_ = std::max<int64_t>(1, std::min(options.sub_group_elements, options.numel));
  sub_groups_ = (options.numel + sub_group_elements_ - 1) / sub_group_elements_;
  for (const auto& name : options.tensor_names) {
    files_.push_back(std::make_unique<AioFile>(directory_ / (name + ".swp"), AioFile::Mode::kCreate, options.warn));
  }
  alignment_ = files_.front()->alignment();
  stride_bytes_ = round_up_bytes(sub_group_elements_ * kFloatBytes, alignment_);
  const int64_t file_bytes = sub_groups_ == 0 ? 0 : sub_group_offset(sub_groups_ - 1) + sub_group_io_bytes(sub_groups_ - 1);
  for (auto& file : files_) file->resize(file_bytes);

  checksums_.assign(static_cast<size_t>(tensors * sub_groups_), 0);
  checksum_known_.assign(static_cast<size_t>(tensors * sub_groups_), 0);

  const int64_t slot_count = std::min(slots_allowed, std::max<int64_t>(sub_groups_, 1));
  const int64_t slot_bytes = stride_bytes_ * tensors;
  staging_allocation_ = static_cast<size_t>(slot_bytes * slot_count + alignment_);
  staging_ = allocator_.allocate(staging_allocation_, MemoryCategory::kOptimizer);
  const auto base = reinterpret_cast<uintptr_t>(staging_);
  const auto aligned = (base + static_cast<uintptr_t>(alignment_) - 1) / static_cast<uintptr_t>(alignment_) *
                       static_cast<uintptr_t>(alignment_);
  slots_.resize(static_cast<size_t>(slot_count));
  for (int64_t s = 0; s < slot_count; ++s) {
    slots_[static_cast<size_t>(s)].data = reinterpret_cast<char*>(aligned) + s * slot_bytes;
  }
}

NvmeSwapStore::~NvmeSwapStore() {
  abandon_in_flight();
  allocator_.deallocate(staging_, staging_allocation_, MemoryCategory::kOptimizer);
  remove_files_and_unlock();
}

void NvmeSwapStore::remove_files_and_unlock() noexcept {
  std::error_code ec;
  for (const auto& file : files_) std::filesystem::remove(file->path(), ec);
  files_.clear();
  if (folder_) folder_->release();
}

std::filesystem::path NvmeSwapStore::file_path(std::string_view tensor_name) const {
  return files_[tensor_index(tensor_name)]->path();
}

int64_t NvmeSwapStore::staging_bytes() const {
  return static_cast<int64_t>(slots_.size()) * stride_bytes_ * static_cast<int64_t>(files_.size());
}

bool NvmeSwapStore::direct_io() const { return files_.front()->direct(); }

size_t NvmeSwapStore::tensor_index(std::string_view tensor_name) const {
  for (size_t i = 0; i < options_.tensor_names.size(); ++i) {
    if (options_.tensor_names[i] == tensor_name) return i;
  }
  throw ConfigError("NVMe swap store has no tensor \"" + std::string(tensor_name) + "\" (it holds " +
                    joined(options_.tensor_names) + ")");
}

int64_t NvmeSwapStore::sub_group_elements(int64_t g) const {
  return std::min(sub_group_elements_, options_.numel - sub_group_begin(g));
}

int64_t NvmeSwapStore::sub_group_io_bytes(int64_t g) const {
  return round_up_bytes(sub_group_elements(g) * kFloatBytes, alignment_);
}

void NvmeSwapStore::issue(Slot& slot, int64_t g, bool write, std::span<const size_t> tensors) {
  ZERO_CHECK(!slot.busy, "staging slot reused while its I/O is in flight");
  slot.busy = true;
  slot.writing = write;
  slot.sub_group = g;
  slot.tensors.assign(tensors.begin(), tensors.end());
  const int64_t offset = sub_group_offset(g);
  const int64_t bytes = sub_group_io_bytes(g);
  for (size_t t : tensors) {
    char* data = slot_tensor(slot, t);
    if (write && options_.verify_checksums) {
      const auto block = static_cast<size_t>(static_cast<int64_t>(t) * sub_groups_ + g);
      checksums_[block] = swap_checksum(data, bytes);
      checksum_known_[block] = 1;
    }
    slot.tickets.push_back(write ? engine_.submit_write(*files_[t], offset, data, bytes)
                                 : engine_.submit_read(*files_[t], offset, data, bytes));
  }
  emit(write ? "write_issued" : "read_issued", g);
}

void NvmeSwapStore::finish(Slot& slot) {
  std::exception_ptr first;
  for (AioEngine::Ticket ticket : slot.tickets) {
    try {
      engine_.wait(ticket);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  const bool was_busy = slot.busy;
  slot.tickets.clear();
  slot.busy = false;
  if (first) std::rethrow_exception(first);
  if (was_busy && !slot.writing) verify_read(slot);
  if (was_busy) emit(slot.writing ? "write_done" : "read_done", slot.sub_group);
}

void NvmeSwapStore::verify_read(const Slot& slot) const {
  if (!options_.verify_checksums) return;
  const int64_t g = slot.sub_group;
  const int64_t bytes = sub_group_io_bytes(g);
  for (size_t t : slot.tensors) {
    const auto block = static_cast<size_t>(static_cast<int64_t>(t) * sub_groups_ + g);
    if (!checksum_known_[block]) continue;  // never written: the sparse file's zeros
    const uint64_t found = swap_checksum(slot_tensor(slot, t), bytes);
    if (found != checksums_[block]) {
      throw FileError(files_[t]->path().string() + ": sub-group " + std::to_string(g) + " (bytes " +
                      std::to_string(sub_group_offset(g)) + " to " + std::to_string(sub_group_offset(g) + bytes) +
                      ") changed on disk since zero.cpp wrote it (checksum mismatch): the swap file was "
                      "altered behind zero.cpp's back or the disk returned bad data, so the swapped "
                      "optimizer state is corrupt; restart from the last checkpoint");
    }
  }
}

void NvmeSwapStore::abandon_in_flight() noexcept {
  // The error that made us abandon the sweep is the one reported; later ones are dropped, and no
  // events are emitted (this also runs in the destructor).
  for (Slot& slot : slots_) {
    for (AioEngine::Ticket ticket : slot.tickets) {
      try {
        engine_.wait(ticket);
      } catch (...) {
      }
    }
    slot.tickets.clear();
    slot.busy = false;
  }
}

void NvmeSwapStore::write_all(std::string_view tensor_name, std::span<const float> source) {
  const size_t t = tensor_index(tensor_name);
  if (static_cast<int64_t>(source.size()) != options_.numel) {
    throw ShapeError("NVMe swap write_all(\"" + std::string(tensor_name) + "\"): got " +
                     std::to_string(source.size()) + " elements, the tensor has " + std::to_string(options_.numel));
  }
  const size_t tensors[] = {t};
  try {
    for (int64_t g = 0; g < sub_groups_; ++g) {
      Slot& slot = slots_[static_cast<size_t>(g) % slots_.size()];  // round robin: oldest write first
      if (slot.busy) finish(slot);
      const int64_t count = sub_group_elements(g);
      char* data = slot_tensor(slot, t);
      std::memcpy(data, source.data() + sub_group_begin(g), static_cast<size_t>(count * kFloatBytes));
      std::memset(data + count * kFloatBytes, 0, static_cast<size_t>(sub_group_io_bytes(g) - count * kFloatBytes));
      issue(slot, g, true, tensors);
    }
    for (Slot& slot : slots_) finish(slot);
  } catch (...) {
    abandon_in_flight();
    throw;
  }
}

void NvmeSwapStore::read_all(std::string_view tensor_name, std::span<float> destination) {
  const size_t t = tensor_index(tensor_name);
  if (static_cast<int64_t>(destination.size()) != options_.numel) {
    throw ShapeError("NVMe swap read_all(\"" + std::string(tensor_name) + "\"): got room for " +
                     std::to_string(destination.size()) + " elements, the tensor has " +
                     std::to_string(options_.numel));
  }
  const size_t tensors[] = {t};
  const auto slots = static_cast<int64_t>(slots_.size());
  try {
    // Keep every slot reading: sub-group g uses slot g % slots.
    for (int64_t g = 0; g < std::min(slots, sub_groups_); ++g) issue(slots_[static_cast<size_t>(g)], g, false, tensors);
    for (int64_t g = 0; g < sub_groups_; ++g) {
      Slot& slot = slots_[static_cast<size_t>(g % slots)];
      finish(slot);
      std::memcpy(destination.data() + sub_group_begin(g), slot_tensor(slot, t),
                  static_cast<size_t>(sub_group_elements(g) * kFloatBytes));
      if (g + slots < sub_groups_) issue(slot, g + slots, false, tensors);
    }
  } catch (...) {
    abandon_in_flight();
    throw;
  }
}

void NvmeSwapStore::for_each_sub_group(const SubGroupFn& fn) {
  if (sub_groups_ == 0) return;
  std::vector<size_t> all(files_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::deque<size_t> free_slots;
  for (size_t s = 0; s < slots_.size(); ++s) free_slots.push_back(s);
  std::deque<size_t> writing;  // slots with a write in flight, oldest first
  // A slot for the next read: a free one, else the one whose write was issued first.
  auto acquire = [&]() -> size_t {
    if (!free_slots.empty()) {
      const size_t s = free_slots.front();
      free_slots.pop_front();
      return s;
    }
    ZERO_CHECK(!writing.empty(), "NVMe swap sweep ran out of staging slots");
    const size_t s = writing.front();
    writing.pop_front();
    finish(slots_[s]);
    return s;
  };
  std::vector<Tensor> views(files_.size());
  try {
    size_t current = acquire();
    issue(slots_[current], 0, false, all);
    for (int64_t g = 0; g < sub_groups_; ++g) {
      std::optional<size_t> next;
      if (options_.pipeline_read && g + 1 < sub_groups_) {
        next = acquire();
        issue(slots_[*next], g + 1, false, all);
      }
      Slot& slot = slots_[current];
      finish(slot);
      const int64_t count = sub_group_elements(g);
      for (size_t t = 0; t < views.size(); ++t) {
        views[t] = Tensor::borrow(slot_tensor(slot, t), {count}, DType::kF32, Device::cpu(), nullptr);
      }
      emit("update", g);
      fn(g, sub_group_begin(g), count, std::span<Tensor>(views));
      for (auto& v : views) v = Tensor();
      issue(slot, g, true, all);
      if (options_.pipeline_write) {
        writing.push_back(current);
      } else {
        finish(slot);
        free_slots.push_back(current);
      }
      if (!next && g + 1 < sub_groups_) {
        next = acquire();
        issue(slots_[*next], g + 1, false, all);
      }
      if (next) current = *next;
    }
    for (size_t s : writing) finish(slots_[s]);
  } catch (...) {
    abandon_in_flight();
    throw;
  }
}

}  // namespace zero::offload
