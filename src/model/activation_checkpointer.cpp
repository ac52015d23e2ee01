#include "model/activation_checkpointer.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "comm/comm.h"
#include "core/check.h"
#include "core/error.h"
#include "model/unit.h"

namespace zero::model {

// One checkpointed unit's saved input. The piece is the whole flattened input (group of one)
// or this rank's ceil(numel/N) elements; it lives on the device (device_piece) or in pinned host
// memory (host_piece), either as its own tensor or as a slot view of the contiguous buffer.
struct ActivationCheckpointer::Saved {
  bool held = false;
  Shape shape;
  DType dtype = DType::kF32;
  int64_t piece_numel = 0;
  Tensor device_piece;
  Tensor host_piece;
  Tensor uploaded;             // cpu_checkpointing: the piece back on the device
  backend::Event upload_done;  // recorded on the transfer stream after the upload
};

ActivationCheckpointer::ActivationCheckpointer(backend::Backend& backend) : backend_(backend) {}
ActivationCheckpointer::~ActivationCheckpointer() = default;

std::vector<bool> ActivationCheckpointer::every_kth(size_t count, size_t k) {
  if (k == 0) throw ConfigError("every_kth: k must be >= 1 (1 checkpoints every block)");
  std::vector<bool> mask(count, false);
  for (size_t i = 0; i < count; i += k) mask[i] = true;
  return mask;
}

size_t ActivationCheckpointer::checkpointed_count(const std::vector<bool>& recomputable) const {
  size_t ordinal = 0;
  std::vector<bool> chosen(recomputable.size(), false);
  for (size_t u = 0; u < recomputable.size(); ++u) {
    if (!recomputable[u]) continue;
    chosen[u] = options_.unit_mask.empty() || options_.unit_mask[ordinal];
    ++ordinal;
  }
  return plan_checkpoint_segments(chosen, options_.segment_units).size();
}

void ActivationCheckpointer::set_options(const CheckpointingOptions& options,
                                         const std::vector<bool>& recomputable) {
  const auto recomputable_count =
      static_cast<size_t>(std::count(recomputable.begin(), recomputable.end(), true));
  if (!options.unit_mask.empty() && options.unit_mask.size() != recomputable_count) {
    throw ConfigError("activation checkpointing: the unit mask has " +
                      std::to_string(options.unit_mask.size()) + " entries but the model has " +
                      std::to_string(recomputable_count) +
                      " recomputable units (transformer blocks); give one entry per block");
  }
  if (options.segment_units < 1) {
    throw ConfigError("activation checkpointing: segments of " +
                      std::to_string(options.segment_units) +
                      " units; a segment needs at least one unit (1 checkpoints every block "
                      "on its own)");
  }
  if (options.contiguous_memory_optimization && !options.partition_activations) {
    throw ConfigError("activation_checkpointing.contiguous_memory_optimization needs "
                      "activation_checkpointing.partition_activations (as in DeepSpeed); set "
                      "partition_activations to true or contiguous_memory_optimization to false");
  }
  CheckpointingOptions previous = options_;
  options_ = options;
  const size_t count = checkpointed_count(recomputable);
  if (options.number_checkpoints && *options.number_checkpoints < static_cast<int64_t>(count)) {
    options_ = previous;
    throw ConfigError("activation_checkpointing.number_checkpoints is " +
                      std::to_string(*options.number_checkpoints) + " but the model checkpoints " +
                      std::to_string(count) + (options.segment_units > 1 ? " segments" : " units") +
                      " per micro-batch; set it to at least " +
                      std::to_string(count) + " or remove the key");
  }
  clear();
  contiguous_ = Tensor();
  slot_numel_ = 0;
}

int ActivationCheckpointer::group_size() const {
  return options_.partition_activations && group_ != nullptr ? group_->world_size() : 1;
}

double ActivationCheckpointer::now_synchronized() {
  backend_.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CheckpointProfile::UnitTimes& ActivationCheckpointer::times(size_t unit) {
  for (auto& t : profile_.units) {
    if (t.unit == unit) return t;
  }
  profile_.units.push_back({});
  profile_.units.back().unit = unit;
  return profile_.units.back();
}

void ActivationCheckpointer::begin_forward(const std::vector<bool>& recomputable, bool enabled) {
  clear();
  chosen_.assign(recomputable.size(), false);
  segments_.clear();
  segment_index_.assign(recomputable.size(), 0);
  saved_.resize(recomputable.size());
  slots_needed_ = 0;
  next_slot_ = 0;
  if (!enabled) return;
  size_t ordinal = 0;
  for (size_t u = 0; u < recomputable.size(); ++u) {
    if (!recomputable[u]) continue;
    ZERO_CHECK(options_.unit_mask.empty() || ordinal < options_.unit_mask.size(),
               "unit mask of " << options_.unit_mask.size() << " entries for more blocks");
    chosen_[u] = options_.unit_mask.empty() || options_.unit_mask[ordinal];
    ++ordinal;
  }
  segments_ = plan_checkpoint_segments(chosen_, options_.segment_units);
  for (size_t i = 0; i < segments_.size(); ++i) {
    for (size_t u = segments_[i].first; u <= segments_[i].last; ++u) segment_index_[u] = i;
  }
  slots_needed_ = segments_.size();
}

const CheckpointSegment& ActivationCheckpointer::segment_of(size_t unit) const {
  ZERO_CHECK(checkpoints(unit), "unit " << unit << " is not checkpointed in this pass");
  return segments_[segment_index_[unit]];
}

void ActivationCheckpointer::ensure_contiguous_buffer(int64_t piece_numel, DType dtype) {
  const int64_t slots = options_.number_checkpoints.value_or(static_cast<int64_t>(slots_needed_));
  ZERO_CHECK(static_cast<int64_t>(next_slot_) < slots,
             "contiguous checkpoint buffer of " << slots << " slots is full");
  const bool fits = contiguous_.defined() && slot_numel_ == piece_numel &&
                    contiguous_.dtype() == dtype && contiguous_.size(0) == slots;
  if (fits) return;
  if (next_slot_ != 0) {
    throw UnsupportedError(
        "activation_checkpointing.contiguous_memory_optimization needs every checkpointed input "
        "to have one size and dtype; this one has " + std::to_string(piece_numel) + " " +
        dtype_name(dtype) + " elements per rank but the buffer's slots hold " +
        std::to_string(slot_numel_) + " " + dtype_name(contiguous_.dtype()) +
        "; set contiguous_memory_optimization to false");
  }
  contiguous_ = Tensor();
  slot_numel_ = piece_numel;
  const Shape shape{slots, slot_numel_};
  contiguous_ = options_.cpu_checkpointing
                    ? Tensor::empty(backend_.pinned_host_allocator(), shape, dtype,
                                    MemoryCategory::kActivations)
                    : backend_.empty(shape, dtype, MemoryCategory::kActivations);
}

void ActivationCheckpointer::begin_segment(size_t first, const Tensor& x) {
  ZERO_CHECK(checkpoints(first) && segment_of(first).first == first,
             "checkpointer begin_segment at unit " << first << ", which starts no segment");
  ZERO_CHECK(x.defined() && x.is_contiguous(),
             "a checkpointed segment needs a contiguous input, got "
                 << (x.defined() ? x.describe() : std::string("undefined")));
  pending_start_ = options_.profile ? now_synchronized() : 0.0;
  Saved& s = saved_[first];
  s = Saved{};
  s.shape = x.shape();
  s.dtype = x.dtype();
  const int n = group_size();
  const int64_t numel = x.numel();
  s.piece_numel = (numel + n - 1) / n;
  const Tensor flat = x.flatten();

  // This rank's piece, made on the compute stream before the units' forward (they read x then).
  Tensor piece;
  const bool own_copy = n > 1 || (options_.contiguous_memory_optimization && !options_.cpu_checkpointing);
  if (own_copy) {
    if (options_.contiguous_memory_optimization && !options_.cpu_checkpointing) {
      ensure_contiguous_buffer(s.piece_numel, x.dtype());
      piece = contiguous_.view(static_cast<int64_t>(next_slot_) * slot_numel_, {s.piece_numel});
    } else {
      piece = backend_.empty({s.piece_numel}, x.dtype(), MemoryCategory::kActivations);
    }
    const int rank = n > 1 ? group_->rank() : 0;
    const int64_t begin = std::min(numel, static_cast<int64_t>(rank) * s.piece_numel);
    const int64_t valid = std::min(numel - begin, s.piece_numel);
    if (valid > 0) {
      Tensor dst = piece.view(0, {valid});
      backend_.copy(dst, flat.view(begin, {valid}));
    }
    if (valid < s.piece_numel) {
      Tensor pad = piece.view(valid, {s.piece_numel - valid});
      backend_.fill(pad, 0.0);
    }
  } else {
    piece = flat;
  }
  pending_piece_ = piece;
  pending_ready_ = options_.cpu_checkpointing
                       ? backend_.record_event(backend::StreamKind::kCompute)
                       : backend::Event();
}

void ActivationCheckpointer::end_segment(const CheckpointSegment& segment,
                                         const std::vector<std::unique_ptr<Unit>>& units) {
  ZERO_CHECK(pending_piece_.defined() && segment.last < units.size(),
             "checkpointer end_segment of units " << segment.first << ".." << segment.last
                                                  << " without begin_segment");
  for (size_t u = segment.first; u <= segment.last; ++u) units[u]->release_activations();
  Saved& s = saved_[segment.first];
  Tensor piece = std::move(pending_piece_);
  pending_piece_ = Tensor();

  if (options_.cpu_checkpointing) {
    if (options_.contiguous_memory_optimization) {
      ensure_contiguous_buffer(s.piece_numel, s.dtype);
      s.host_piece = contiguous_.view(static_cast<int64_t>(next_slot_) * slot_numel_, {s.piece_numel});
    } else {
      s.host_piece = Tensor::empty(backend_.pinned_host_allocator(), {s.piece_numel}, s.dtype,
                                   MemoryCategory::kActivations);
    }
    {
      // The download waits only for the piece, so on a device it overlaps the units' forward;
      // the host does not wait for it. (The upload before the recompute reads host_piece on the
      // same transfer stream, after it.)
      backend::StreamGuard on_transfer(backend_, backend::StreamKind::kTransfer);
      backend_.wait_event(backend::StreamKind::kTransfer, pending_ready_);
      backend_.copy_to_pinned_async(s.host_piece, piece);
    }
    // The piece's device memory may be reused by compute work only after the download read it:
    // compute waits (on the device) before freeing it here.
    backend_.wait_event(backend::StreamKind::kCompute,
                        backend_.record_event(backend::StreamKind::kTransfer));
  } else {
    s.device_piece = piece;
  }
  pending_ready_ = backend::Event();
  if (options_.contiguous_memory_optimization) ++next_slot_;
  s.held = true;
  note_memory();
  if (options_.synchronize_checkpoint_boundary) backend_.synchronize();
  if (options_.profile) {
    auto& t = times(segment.first);
    ++t.forwards;
    t.forward_seconds += now_synchronized() - pending_start_;
  }
}

bool ActivationCheckpointer::holds(size_t unit) const {
  return unit < saved_.size() && saved_[unit].held;
}

void ActivationCheckpointer::start_upload(size_t unit) {
  Saved& s = saved_[unit];
  // Allocated on the transfer stream, which writes it: a block the compute stream freed is
  // handed out only after compute's last use of it (the allocator's marker, backend.h), so the
  // upload need not wait for the compute work queued so far and overlaps it.
  // Neither does the host wait: host_piece (pinned) stays untouched until release(), after
  // compute waited for upload_done.
  backend::StreamGuard on_transfer(backend_, backend::StreamKind::kTransfer);
  s.uploaded = backend_.empty({s.piece_numel}, s.dtype, MemoryCategory::kActivations);
  backend_.copy_from_pinned_async(s.uploaded, s.host_piece);
  s.upload_done = backend_.record_event(backend::StreamKind::kTransfer);
  note_memory();
}

Tensor ActivationCheckpointer::restore(size_t unit) {
  Saved& s = saved_[unit];
  Tensor piece = s.device_piece;
  if (options_.cpu_checkpointing) {
    if (!s.uploaded.defined()) start_upload(unit);
    backend_.wait_event(backend::StreamKind::kCompute, s.upload_done);
    piece = s.uploaded;
    // Prefetch: the previous checkpointed unit's input uploads while this unit recomputes and
    // runs its backward.
    for (size_t j = unit; j-- > 0;) {
      if (holds(j)) {
        if (!saved_[j].uploaded.defined()) start_upload(j);
        break;
      }
    }
  }
  const int n = group_size();
  const int64_t numel = shape_numel(s.shape);
  if (n == 1) return piece.view(0, s.shape);
  Tensor gathered = backend_.empty({s.piece_numel * n}, s.dtype, MemoryCategory::kActivations);
  group_->all_gather(piece, gathered);
  ZERO_CHECK(numel <= gathered.numel(), "gathered checkpoint smaller than the input");
  return gathered.view(0, s.shape);
}

void ActivationCheckpointer::recompute(const CheckpointSegment& segment,
                                       const std::vector<std::unique_ptr<Unit>>& units,
                                       StepContext& ctx) {
  ZERO_CHECK(holds(segment.first) && segment.last < units.size(),
             "recompute of units " << segment.first << ".." << segment.last
                                   << " without a saved input");
  const double start = options_.profile ? now_synchronized() : 0.0;
  Tensor x = restore(segment.first);
  for (size_t u = segment.first; u <= segment.last; ++u) x = units[u]->forward(ctx, x);
  release(saved_[segment.first]);
  if (options_.profile) {
    auto& t = times(segment.first);
    ++t.recomputes;
    t.recompute_seconds += now_synchronized() - start;
  }
}

void ActivationCheckpointer::release(Saved& saved) { saved = Saved{}; }

void ActivationCheckpointer::clear() {
  for (auto& s : saved_) release(s);
  pending_piece_ = Tensor();
  pending_ready_ = backend::Event();
  next_slot_ = 0;
}

void ActivationCheckpointer::note_memory() {
  const CheckpointMemory now = memory();
  memory_.peak_device_bytes = std::max(memory_.peak_device_bytes, now.device_bytes);
  memory_.peak_host_bytes = std::max(memory_.peak_host_bytes, now.host_bytes);
}

CheckpointMemory ActivationCheckpointer::memory() const {
  CheckpointMemory m = memory_;
  m.device_bytes = 0;
  m.host_bytes = 0;
  const bool buffered = options_.contiguous_memory_optimization && contiguous_.defined();
  if (buffered) (options_.cpu_checkpointing ? m.host_bytes : m.device_bytes) += contiguous_.nbytes();
  for (const auto& s : saved_) {
    if (!s.held) continue;
    if (!buffered) {
      if (s.device_piece.defined()) m.device_bytes += s.device_piece.nbytes();
      if (s.host_piece.defined()) m.host_bytes += s.host_piece.nbytes();
    }
    if (s.uploaded.defined()) m.device_bytes += s.uploaded.nbytes();
  }
  m.peak_device_bytes = std::max(m.peak_device_bytes, m.device_bytes);
  m.peak_host_bytes = std::max(m.peak_host_bytes, m.host_bytes);
  return m;
}

void ActivationCheckpointer::reset_peaks() {
  const CheckpointMemory now = memory();
  memory_.peak_device_bytes = now.device_bytes;
  memory_.peak_host_bytes = now.host_bytes;
}

CheckpointProfile ActivationCheckpointer::take_profile() {
  CheckpointProfile out = std::move(profile_);
  profile_ = CheckpointProfile{};
  std::sort(out.units.begin(), out.units.end(),
            [](const auto& a, const auto& b) { return a.unit < b.unit; });
  return out;
}

}  // namespace zero::model
