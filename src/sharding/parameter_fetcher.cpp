#include "sharding/parameter_fetcher.h"

#include <algorithm>
#include <optional>

#include "core/check.h"

namespace zero::sharding {

ParameterFetcher::ParameterFetcher(model::Model& model, backend::Backend& backend,
                                   comm::Comm& comm, const PartitionLayout& layout,
                                   Source source, const config::ZeroConfig& zero,
                                   std::vector<std::vector<size_t>> needs,
                                   ExposedCommTime& exposed, GatherOptions gathering)
    : model_(model),
      backend_(backend),
      comm_(comm),
      layout_(layout),
      source_(source),
      zero_(zero),
      exposed_(exposed),
      needs_(std::move(needs)),
      slots_(layout.units().size()),
      gathering_(gathering),
      secondary_(layout.units().size()) {
  ZERO_CHECK((source.partition == nullptr) != (source.full == nullptr),
             "ParameterFetcher needs exactly one source");
  if (source.full != nullptr) gathering_ = GatherOptions{};
  if (gathering_.secondary != nullptr) {
    ZERO_CHECK(comm.world_size() % gathering_.secondary->world_size() == 0,
               "the hpZ group's size " << gathering_.secondary->world_size()
                                       << " does not divide the world of " << comm.world_size());
  }
  const size_t units = needs_.size();
  // The full trace: forward 0..U-1 then backward U-1..0.
  for (size_t u = 0; u < units; ++u) trace_.push_back(needs_[u]);
  for (size_t u = units; u-- > 0;) trace_.push_back(needs_[u]);
  trace_prefix_.assign(trace_.size() + 1, 0);
  for (size_t t = 0; t < trace_.size(); ++t) {
    int64_t elements = 0;
    for (size_t u : trace_[t]) elements += layout_.unit(u).padded_numel;
    trace_prefix_[t + 1] = trace_prefix_[t] + elements;
  }
}

bool ParameterFetcher::persistent(size_t u) const {
  return layout_.unit(u).numel < zero_.stage3_param_persistence_threshold;
}

int64_t ParameterFetcher::position(size_t u, bool backward) const {
  const auto units = static_cast<int64_t>(needs_.size());
  return backward ? units + (units - 1 - static_cast<int64_t>(u)) : static_cast<int64_t>(u);
}

int64_t ParameterFetcher::next_use(size_t u, int64_t after) const {
  for (int64_t t = after + 1; t < pass_length_; ++t) {
    const auto& need = trace_[static_cast<size_t>(t)];
    if (std::find(need.begin(), need.end(), u) != need.end()) return t;
  }
  return -1;
}

void ParameterFetcher::begin_pass(bool with_backward) {
  with_backward_ = with_backward;
  pass_length_ = static_cast<int64_t>(with_backward ? trace_.size() : needs_.size());
}

void ParameterFetcher::release_keeping_secondary(size_t u) {
  Slot& slot = slots_[u];
  if (gathering_.secondary != nullptr && with_backward_ && slot.bound &&
      !secondary_[u].defined()) {
    // The secondary group's rank k keeps elements [k * m, (k + 1) * m) of the padded unit, so an
    // all_gather over the group rebuilds it whole. The source is the gathered unit, or the CPU's
    // f32 working copy of it (whose values are the storage dtype's: the narrowing is exact).
    const comm::Comm& group = *gathering_.secondary;
    const int64_t slice = layout_.unit(u).padded_numel / group.world_size();
    const Tensor& values = slot.gathered.defined() ? slot.gathered : slot.working;
    const int64_t begin = group.rank() * slice;
    const int64_t real = std::clamp<int64_t>(layout_.unit(u).numel - begin, 0, slice);
    secondary_[u] =
        backend_.zeros({slice}, source_.partition->dtype(), MemoryCategory::kParams);
    if (real > 0) {
      Tensor target = secondary_[u].view(0, {real});
      backend_.copy(target, values.view(begin, {real}));
    }
    secondary_elements_ += slice;
    peak_secondary_elements_ = std::max(peak_secondary_elements_, secondary_elements_);
  }
  release(u);
}

void ParameterFetcher::drop_secondary(size_t u) {
  if (!secondary_[u].defined()) return;
  secondary_elements_ -= secondary_[u].numel();
  secondary_[u] = Tensor();
}

void ParameterFetcher::wait_for_gather(Slot& slot) {
  if (!slot.work && !slot.quantized) return;
  ExposedScope blocked(exposed_);
  if (slot.work) slot.work->wait();
  if (slot.quantized) slot.quantized->wait();
  slot.work.reset();
}

void ParameterFetcher::start_gather(size_t u, bool async) {
  Slot& slot = slots_[u];
  ZERO_CHECK(!slot.active, "unit " << u << " gathered twice");
  const UnitPartition& part = layout_.unit(u);
  slot.active = true;
  if (source_.partition != nullptr) {
    slot.gathered =
        backend_.empty({part.padded_numel}, source_.partition->dtype(), MemoryCategory::kComm);
    if (secondary_[u].defined()) {
      // hpZ: within the secondary group, from the slices the unit's first gather left.
      comm::Comm& group = *gathering_.secondary;
      if (async) {
        slot.work = group.all_gather_async(secondary_[u], slot.gathered);
      } else {
        ExposedScope blocked(exposed_);
        group.all_gather(secondary_[u], slot.gathered);
      }
    } else if (gathering_.quantization_group > 0) {
      // qwZ: the shard's int8 codes travel; the quantized copy is taken before this returns.
      const Tensor shard = source_.partition->read(u, u);
      std::optional<ExposedScope> blocked;
      if (!async) blocked.emplace(exposed_);
      slot.quantized = std::make_unique<comm::QuantizedAllGather>(
          backend_, comm_, shard, gathering_.quantization_group, async);
    } else {
      slot.shard = source_.partition->read(u, u);
      if (async) {
        slot.work = comm_.all_gather_async(slot.shard, slot.gathered);
      } else {
        ExposedScope blocked(exposed_);
        comm_.all_gather(slot.shard, slot.gathered);
        slot.shard = Tensor();
      }
    }
  }
  live_elements_ += part.padded_numel;
  peak_live_elements_ = std::max(peak_live_elements_, live_elements_);
}

void ParameterFetcher::make_ready(size_t u) {
  Slot& slot = slots_[u];
  wait_for_gather(slot);
  if (slot.quantized) {
    slot.quantized->finish(slot.gathered);
    slot.quantized.reset();
  }
  slot.shard = Tensor();
  if (!slot.bound) {
    const UnitPartition& part = layout_.unit(u);
    const bool gathered = source_.partition != nullptr;
    // The CPU backend computes 16-bit arguments in f32 (backend/cpu/cpu_f32_twins.h): widening a
    // 16-bit unit once here saves it from widening the weights again in every op. A device's
    // kernels read 16-bit weights as they are (bf16 tensor-core products, half the traffic):
    // there the unit keeps its storage dtype. The values are the same either way.
    const DType stored = gathered ? slot.gathered.dtype() : source_.full->dtype();
    const DType working = backend_.device().is_cpu() ? DType::kF32 : stored;
    if (gathered && slot.gathered.dtype() == working) {
      slot.working = slot.gathered;
    } else if (!gathered && stored == working) {
      // The layers read the 16-bit flat buffer itself: a view, nothing copied or allocated.
      slot.working = source_.full->view(part.flat_begin, {part.numel});
    } else {
      slot.working = backend_.empty({part.padded_numel}, working, MemoryCategory::kComm);
      Tensor real = slot.working.view(0, {part.numel});
      backend_.copy(real, gathered ? slot.gathered.view(0, {part.numel})
                                   : source_.full->view(part.flat_begin, {part.numel}));
      slot.gathered = Tensor();
    }
    model_.bind_unit_params(u, slot.working);
    slot.bound = true;
  }
}

void ParameterFetcher::release(size_t u) {
  Slot& slot = slots_[u];
  if (!slot.active) return;
  wait_for_gather(slot);
  if (slot.bound) model_.bind_unit_params(u, Tensor());
  slot = Slot{};
  live_elements_ -= layout_.unit(u).padded_numel;
}

void ParameterFetcher::evict_for(int64_t elements, const std::vector<size_t>& keep, int64_t now) {
  while (live_elements_ + elements > zero_.stage3_max_live_parameters) {
    // Evict the gathered unit whose next use is farthest away (never-used-again first).
    size_t victim = slots_.size();
    int64_t farthest = -2;
    for (size_t u = 0; u < slots_.size(); ++u) {
      if (!slots_[u].active || persistent(u)) continue;
      if (std::find(keep.begin(), keep.end(), u) != keep.end()) continue;
      int64_t next = next_use(u, now);
      if (next < 0) next = pass_length_ + 1;
      if (next > farthest) {
        farthest = next;
        victim = u;
      }
    }
    if (victim == slots_.size()) return;  // only what the current unit needs is left
    if (farthest <= pass_length_) {
      release_keeping_secondary(victim);  // used again in this pass
    } else {
      release(victim);
    }
  }
}

void ParameterFetcher::before_use(size_t u, bool backward) {
  const int64_t now = position(u, backward);
  const auto& need = needs_[u];
  for (size_t v : need) {
    if (!slots_[v].active) {
      evict_for(layout_.unit(v).padded_numel, need, now);
      start_gather(v, false);
    }
    make_ready(v);
  }
  prefetch_after(now);
}

void ParameterFetcher::prefetch_after(int64_t now) {
  // The store's own read-ahead (NVMe: disk reads into staging buffers) runs as far ahead as it
  // has buffers, independent of the gather prefetch below.
  if (source_.partition != nullptr) {
    bool more = true;
    for (int64_t t = now + 1; t < pass_length_ && more; ++t) {
      for (size_t v : trace_[static_cast<size_t>(t)]) {
        if (slots_[v].active) continue;
        if (!source_.partition->prefetch(v)) {
          more = false;
          break;
        }
      }
    }
  }
  int64_t budget = zero_.stage3_prefetch_bucket_size;
  for (int64_t t = now + 1; t < pass_length_ && budget > 0; ++t) {
    for (size_t v : trace_[static_cast<size_t>(t)]) {
      if (slots_[v].active) continue;
      const int64_t elements = layout_.unit(v).padded_numel;
      if (elements > budget) return;
      if (live_elements_ + elements > zero_.stage3_max_live_parameters) return;
      start_gather(v, true);
      budget -= elements;
    }
  }
}

void ParameterFetcher::after_use(size_t u, bool backward) {
  const int64_t now = position(u, backward);
  for (size_t v : needs_[u]) {
    if (persistent(v) || !slots_[v].active) continue;
    const int64_t next = next_use(v, now);
    if (next < 0) {
      release(v);
      drop_secondary(v);
      continue;
    }
    // Elements other units need between now and the next use: DeepSpeed's reuse distance.
    const int64_t distance = trace_prefix_[static_cast<size_t>(next)] -
                             trace_prefix_[static_cast<size_t>(now) + 1];
    if (distance >= zero_.stage3_max_reuse_distance) release_keeping_secondary(v);
  }
}

void ParameterFetcher::end_pass() {
  for (size_t u = 0; u < slots_.size(); ++u) {
    if (!persistent(u)) release(u);
  }
  for (size_t u = 0; u < slots_.size(); ++u) {
    if (slots_[u].work || slots_[u].quantized) make_ready(u);
    drop_secondary(u);
  }
}

void ParameterFetcher::invalidate() {
  for (size_t u = 0; u < slots_.size(); ++u) {
    release(u);
    drop_secondary(u);
  }
}

}  // namespace zero::sharding
