#include "sharding/zero_stage.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/error.h"
#include "sharding/dtype_ops.h"

namespace zero::sharding {
namespace {

bool floating_storage(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace

ZeroStage::ZeroStage(model::Model& model, comm::Comm& comm, const config::ZeroConfig& zero,
                     int64_t gradient_accumulation_steps, Precision precision,
                     double gradient_prescale, const config::AioConfig& aio)
    : model_(model),
      backend_(model.backend()),
      comm_(comm),
      zero_(zero),
      stage_(static_cast<int>(zero.stage)),
      accumulation_steps_(gradient_accumulation_steps),
      layout_(model, comm.world_size(), comm.rank()),
      precision_(precision),
      reduction_{zero.reduce_scatter, comm.world_size() > 1 ? gradient_prescale : 1.0},
      zero_plus_plus_(ZeroPlusPlus::from(zero, static_cast<int>(zero.stage), comm.world_size())) {
  ZERO_CHECK(stage_ >= 0 && stage_ <= 3, "ZeRO stage " << stage_);
  reduction_.quantization_group = zero_plus_plus_.gradient_group;
  if (zero_plus_plus_.hpz_size > 1) {
    hpz_group_ = make_hpz_group(comm_, zero_plus_plus_.hpz_size);
    if (zero_plus_plus_.gradient_group > 0) {
      // qgZ goes hierarchical over hpZ's nodes: the second hop runs among the ranks that hold
      // this rank's place in every node.
      const int rank = comm_.rank();
      const auto size = static_cast<int>(zero_plus_plus_.hpz_size);
      qgz_column_group_ = comm_.split(rank % size, rank);
      reduction_.node = hpz_group_.get();
      reduction_.column = qgz_column_group_.get();
    }
  }
  ZERO_CHECK(model.param_dtype() == DType::kF32, "ZeRO stages compute on f32 parameters here");
  ZERO_CHECK(floating_storage(precision_.param) && floating_storage(precision_.accum) &&
                 floating_storage(precision_.comm),
             "unsupported precision combination");
  const size_t units = model.units().size();
  needs_.resize(units);
  last_backward_user_.assign(units, 0);
  for (size_t u = 0; u < units; ++u) {
    needs_[u].push_back(u);
    for (const model::Parameter* p : model.units()[u]->borrowed_parameters()) {
      const size_t owner = model.unit_of(p);
      if (std::find(needs_[u].begin(), needs_[u].end(), owner) == needs_[u].end()) {
        needs_[u].push_back(owner);
      }
    }
  }
  // Backward runs units in descending order, so the lowest user finishes a unit's gradient.
  for (size_t u = units; u-- > 0;) {
    for (size_t v : needs_[u]) last_backward_user_[v] = u;
  }
  for (model::Parameter* p : model.parameters()) {
    full_segments_.push_back({p->flat_offset, p->numel(), p->spec.weight_decay});
  }

  if (precision_.master != DType::kF32 &&
      (precision_.master != DType::kBF16 || precision_.param != DType::kBF16 || stage_ == 0)) {
    throw ConfigError("bf16.bf16_master_weights_and_grads needs bf16.enabled and ZeRO stage 1, 2 "
                      "or 3 (the master weights live in the optimizer's partition)");
  }
  if (precision_.states != DType::kF32 &&
      (precision_.states != DType::kBF16 || precision_.master != DType::kBF16)) {
    throw ConfigError("bf16.bf16_optimizer_states needs bf16.bf16_master_weights_and_grads "
                      "(DeepSpeed keeps them together)");
  }
  if (precision_.stochastic_rounding && precision_.master != DType::kBF16) {
    throw ConfigError("bf16.stochastic_rounding rounds updates into bf16 master weights: set "
                      "bf16.bf16_master_weights_and_grads (with fp32 master weights no update is "
                      "lost to rounding)");
  }
  const bool mixed = precision_.mixed();
  const int64_t full_numel = model.num_parameters();
  // 16-bit training starts from 16-bit weights (DeepSpeed converts the model first); the fp32
  // master weights are copies of those.
  // A model built partitioned (zero.Init) has no flat buffers: its values come unit by unit.
  model::UnitValueSource* values = model.value_source();
  if (values != nullptr && stage_ != 3) {
    throw ConfigError("the model was built partitioned (zero.Init, for ZeRO stage 3), but "
                      "zero_optimization.stage is " + std::to_string(stage_) +
                      ": build it whole for stages 0-2, or use stage 3");
  }
  if (mixed && values == nullptr) round_through(backend_, model.flat_params(), precision_.param);
  if (stage_ >= 1) {
    master_ = backend_.zeros({layout_.partition_numel()}, DType::kF32, MemoryCategory::kOptimizer);
    if (values != nullptr) {
      fill_master_from(*values);
    } else {
      copy_shards_from_full(model.flat_params(), master_);
    }
    if (precision_.master != DType::kF32) {
      // The parameters are already bf16 values: the narrowing is exact.
      Tensor narrow = backend_.empty({layout_.partition_numel()}, precision_.master,
                                     MemoryCategory::kOptimizer);
      backend_.copy(narrow, master_);
      master_ = narrow;
    }
  } else if (mixed) {
    master_ = backend_.empty({full_numel}, DType::kF32, MemoryCategory::kOptimizer);
    backend_.copy(master_, model.flat_params());
  }
  if (stage_ <= 1 && mixed && precision_.accum == DType::kF32) {
    // The micro-batch gradients are unit buffers already (grads_by_unit): hold them instead of
    // summing into a flat accumulator that would live through every forward.
    // On one rank at stage 0 the summed gradients are the reduced ones, and with one micro-batch
    // and no loss scale nothing scales them: their norm is taken as they are stored.
    const bool norms_as_stored = stage_ == 0 && comm_.world_size() == 1 &&
                                 accumulation_steps_ == 1 && precision_.param != DType::kF16;
    // Then nothing adds to or scales them either: they can be held in the parameters' dtype,
    // which the device optimizer reads (the host optimizers of offload read f32).
    const bool in_param_dtype =
        norms_as_stored && zero_.offload_optimizer.device == config::OffloadDevice::kNone;
    held_ = std::make_unique<HeldUnitGradients>(backend_, layout_, full_segments_, precision_.param,
                                                norms_as_stored, in_param_dtype);
  } else if (stage_ <= 1 && (mixed || accumulation_steps_ > 1)) {
    accumulator_ = backend_.zeros({full_numel}, mixed ? precision_.accum : DType::kF32,
                                  MemoryCategory::kGrads);
  }
  if (zero_.offload_optimizer.device != config::OffloadDevice::kNone) create_host_backend();
  if (stage_ >= 2) {
    // Under optimizer offload the reduced gradients leave the device bucket by bucket during
    // backward and accumulate in host memory (DeepSpeed's ZeRO-Offload); the device keeps none.
    partition_grads_ = grads_backend().zeros({layout_.partition_numel()}, precision_.accum,
                                             MemoryCategory::kGrads);
    reducer_ = std::make_unique<GradientReducer>(backend_, comm_, layout_, zero_.reduce_bucket_size,
                                                 zero_.overlap_comm_enabled(), precision_.comm,
                                                 exposed_, reduction_, host_backend_.get());
  }
  if (grads_by_unit()) {
    unit_grads_.resize(units);
    model.release_flat_grads();
  }
  if (zero_.offload_param.device != config::OffloadDevice::kNone && stage_ != 3) {
    throw ConfigError("zero_optimization.offload_param offloads ZeRO-3's parameter partitions: it "
                      "needs zero_optimization.stage 3 (DeepSpeed ignores it below); set the stage "
                      "or remove offload_param");
  }
  if (stage_ == 3) {
    partition_store_ = make_partition_store(backend_, layout_, precision_.param,
                                            PartitionStoreOptions{zero_.offload_param, aio});
    // The initial parameters are the master weights' values (already 16-bit values in mixed
    // precision, so the store's rounding is exact).
    partition_store_->write(0, layout_.units().size() - 1, master_);
    model.release_value_source();
    fetcher_ = std::make_unique<ParameterFetcher>(
        model, backend_, comm_, layout_, ParameterFetcher::Source{partition_store_.get(), nullptr},
        zero_, needs_, exposed_,
        GatherOptions{zero_plus_plus_.weight_group, hpz_group_.get()});
  } else if (mixed) {
    param_storage_ = backend_.empty({full_numel}, precision_.param, MemoryCategory::kParams);
    backend_.copy(param_storage_, model.flat_params());
    // Local widening costs no communication: keep nothing around, prefetch nothing.
    config::ZeroConfig local = zero_;
    local.stage3_prefetch_bucket_size = 0;
    local.stage3_max_reuse_distance = 0;
    local.stage3_max_live_parameters = std::numeric_limits<int64_t>::max();
    local.stage3_param_persistence_threshold = 0;
    fetcher_ = std::make_unique<ParameterFetcher>(model, backend_, comm_, layout_,
                                                  ParameterFetcher::Source{nullptr, &param_storage_},
                                                  local, needs_, exposed_);
  }
  if (params_by_unit()) model.release_flat_params();
  if (params_by_unit() || grads_by_unit()) model.set_observer(this);
  if (host_backend_) offload_master();
}

void ZeroStage::create_host_backend() {
  const config::OffloadOptimizerConfig& offload = zero_.offload_optimizer;
  if (stage_ == 0) {
    throw ConfigError("zero_optimization.offload_optimizer needs ZeRO stage 1, 2 or 3 (the "
                      "offloaded optimizer works on the rank's partition); set "
                      "zero_optimization.stage");
  }
  if (precision_.master != DType::kF32) {
    throw UnsupportedError("zero_optimization.offload_optimizer with "
                           "bf16.bf16_master_weights_and_grads is not supported: the CPU step "
                           "keeps f32 master weights; remove one of the two");
  }
  if (offload.ratio < 1.0 && stage_ != 3) {
    throw ConfigError("zero_optimization.offload_optimizer.ratio " + std::to_string(offload.ratio) +
                      " (part of the optimizer step on the device) applies at ZeRO stage 3, as in "
                      "DeepSpeed; set ratio to 1 or use stage 3");
  }
  if (offload.ratio < 1.0 && offload.device == config::OffloadDevice::kNvme) {
    throw UnsupportedError("zero_optimization.offload_optimizer.ratio " + std::to_string(offload.ratio) +
                           " with \"device\": \"nvme\" is not built (partial offload keeps the "
                           "offloaded part in CPU memory); set ratio to 1 or the device to \"cpu\"");
  }
  // Pinned memory makes the per-step gradient download and parameter upload run at full
  // bandwidth (DeepSpeed's pin_memory); without it the buffers are ordinary host memory. The
  // optimizer's state and the offloaded partitions (allocated by the host backend) live there.
  Allocator& host_memory =
      offload.pin_memory ? backend_.pinned_host_allocator() : host_pageable_allocator();
  host_backend_ = std::make_unique<backend::CpuBackend>(host_memory);
}

void ZeroStage::offload_master() {
  Allocator& host_memory = host_backend_->allocator();
  const int64_t n = layout_.partition_numel();
  if (zero_.offload_optimizer.ratio < 1.0) keep_device_part();
  Tensor master = Tensor::empty(host_memory, {n}, DType::kF32, MemoryCategory::kOptimizer);
  backend_.copy_to_host(master.raw_data(), master_);
  master_ = master;
  host_grads_ = Tensor::empty(host_memory, {n}, DType::kF32, MemoryCategory::kGrads);
  if (precision_.mixed()) {
    host_param_copy_ = Tensor::empty(host_memory, {n}, precision_.param, MemoryCategory::kParams);
  }
}

void ZeroStage::keep_device_part() {
  // DeepSpeed 0.19: of n sub-groups (sub_group_size elements of the partition), the first
  // int((1 - ratio) * n) stay on the device. Here the split is rounded up to a unit boundary,
  // so each unit's shard is updated on one side (its 16-bit copy comes from there).
  const int64_t n = layout_.partition_numel();
  const int64_t sub_group = std::max<int64_t>(zero_.sub_group_size, 1);
  const int64_t sub_groups = (n + sub_group - 1) / sub_group;
  const auto on_device = static_cast<int64_t>((1.0 - zero_.offload_optimizer.ratio) *
                                              static_cast<double>(sub_groups));
  const int64_t target = std::min(n, on_device * sub_group);
  device_units_ = 0;
  split_ = 0;
  while (split_ < target && device_units_ < layout_.units().size()) {
    const UnitPartition& part = layout_.unit(device_units_++);
    split_ = part.partition_offset + part.shard_numel;
  }
  if (split_ == 0) return;
  master_device_ = backend_.empty({split_}, DType::kF32, MemoryCategory::kOptimizer);
  backend_.copy(master_device_, master_.view(0, {split_}));
  grads_device_ = backend_.zeros({split_}, DType::kF32, MemoryCategory::kGrads);
  for (const backend::ParamSegment& segment : layout_.segments()) {
    if (segment.offset < split_) {
      device_segments_.push_back(segment);
    } else {
      backend::ParamSegment shifted = segment;
      shifted.offset -= split_;
      host_segments_.push_back(shifted);
    }
  }
}

Tensor ZeroStage::master_on_device(DType dtype) {
  if (!host_backend_) {
    if (master_.dtype() == dtype) return master_;
    Tensor converted = backend_.empty({master_.numel()}, dtype, MemoryCategory::kComm);
    backend_.copy(converted, master_);  // rounds to nearest-even
    return converted;
  }
  const Tensor& host = host_partition_in(dtype);
  Tensor uploaded = backend_.empty({master_.numel()}, dtype, MemoryCategory::kComm);
  backend_.copy_from_host(uploaded, host.raw_data());
  return uploaded;
}

const Tensor& ZeroStage::host_partition_in(DType dtype) {
  const bool fresh = host_param_copy_fresh_;
  host_param_copy_fresh_ = false;
  if (dtype == DType::kF32) return master_;
  ZERO_CHECK(host_param_copy_.defined() && host_param_copy_.dtype() == dtype,
             "offload: no host copy in " << dtype_name(dtype));
  // The CPU step wrote the copy in its pass; after a checkpoint load it is converted here (the
  // same round-to-nearest-even).
  if (!fresh) host_backend_->copy(host_param_copy_, master_);
  return host_param_copy_;
}

void ZeroStage::fill_master_from(model::UnitValueSource& values) {
  const int rank = layout_.rank();
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const UnitPartition& part = layout_.unit(u);
    const int64_t count = part.owned_count(rank);
    if (count == 0) continue;
    // One unit's shard at a time in host memory: never the whole model.
    Tensor host = Tensor::empty(cpu_allocator(), {count}, DType::kF32, MemoryCategory::kOther);
    values.unit_values(model_, u, part.owned_begin(rank), count, host);
    Tensor target = master_.view(part.partition_offset, {count});
    backend_.copy_from_host(target, host.raw_data());
    // 16-bit training starts from 16-bit weights, as round_through does to a whole model.
    if (precision_.mixed()) round_through(backend_, target, precision_.param);
  }
}

ZeroStage::~ZeroStage() { model_.set_observer(nullptr); }

void ZeroStage::copy_shards_from_full(const Tensor& full, Tensor& partition) {
  backend_.fill(partition, 0.0);
  const int rank = layout_.rank();
  for (const UnitPartition& part : layout_.units()) {
    const int64_t count = part.owned_count(rank);
    if (count == 0) continue;
    Tensor dst = partition.view(part.partition_offset, {count});
    backend_.copy(dst, full.view(part.flat_begin + part.owned_begin(rank), {count}));
  }
}

void ZeroStage::begin_pass(bool with_backward) {
  in_training_pass_ = with_backward;
  if (fetcher_) fetcher_->begin_pass(with_backward);
}

void ZeroStage::end_pass(bool had_backward) {
  if (fetcher_) fetcher_->end_pass();
  if (!had_backward) return;
  if (!grads_by_unit() && accumulator_.defined()) {
    backend_.add(accumulator_, model_.flat_grads(), 1.0);
    model_.zero_grad();
  }
  if (reducer_) reducer_->flush(partition_grads_);
}

void ZeroStage::before_forward(size_t unit) {
  if (fetcher_) fetcher_->before_use(unit, false);
}

void ZeroStage::after_forward(size_t unit) {
  if (fetcher_) fetcher_->after_use(unit, false);
}

void ZeroStage::before_backward(size_t unit) {
  if (fetcher_) fetcher_->before_use(unit, true);
  if (!grads_by_unit()) return;
  for (size_t v : needs_[unit]) {
    if (unit_grads_[v].defined()) continue;
    // A held unit's first buffer becomes its gradient (kGrads); otherwise it is transient.
    unit_grads_[v] = backend_.zeros({layout_.unit(v).padded_numel}, DType::kF32,
                                    held_ ? MemoryCategory::kGrads : MemoryCategory::kComm);
    model_.bind_unit_grads(v, unit_grads_[v]);
  }
}

void ZeroStage::accept_unit_gradient(size_t v) {
  model_.bind_unit_grads(v, Tensor());
  Tensor grad = unit_grads_[v];
  unit_grads_[v] = Tensor();
  const UnitPartition& part = layout_.unit(v);
  Tensor real = grad.view(0, {part.numel});
  // The micro-batch gradient as the GPU path stores it: in the parameters' dtype.
  if (stage_ >= 2) {
    round_through(backend_, real, precision_.param);
    reducer_->add(v, grad, partition_grads_);
    return;
  }
  if (held_) {
    held_->add(v, grad);
    return;
  }
  Tensor acc = accumulator_.view(part.flat_begin, {part.numel});
  if (acc.dtype() == DType::kF32) {
    backend_.add_rounded(acc, real, precision_.param);  // one fused pass on a device
  } else {
    round_through(backend_, real, precision_.param);
    accumulate(backend_, acc, real);
  }
}

void ZeroStage::after_backward(size_t unit) {
  if (grads_by_unit()) {
    for (size_t v : needs_[unit]) {
      if (last_backward_user_[v] == unit) accept_unit_gradient(v);
    }
  }
  if (fetcher_) fetcher_->after_use(unit, true);
}

void ZeroStage::reduce_gradients(double scale, Tensor& squared_norm) {
  if (poison_next_reduction_) {
    // The test hook: a non-finite value in this rank's gradients where a real overflow would
    // put it - before the reduction for stages 0-1 (it then reaches every rank through the
    // reduction), in this rank's reduced partition for stages 2-3 (the reduction already ran
    // during backward; only the all-reduced overflow flag tells the other ranks).
    poison_next_reduction_ = false;
    Tensor& target = stage_ >= 2 ? partition_grads_
                     : accumulator_.defined() ? accumulator_
                                              : model_.flat_grads();
    Tensor first = held_ && stage_ <= 1 ? held_->view(0, 1) : target.view(0, {1});
    (stage_ >= 2 ? grads_backend() : backend_).fill(first, std::numeric_limits<double>::quiet_NaN());
  }
  Tensor reduced;  // the reduced gradients in their storage dtype
  if (stage_ == 0 && held_) {
    reduce_held_gradients(scale, squared_norm);
    return;
  }
  if (stage_ == 0) {
    reduced = accumulator_.defined() ? accumulator_ : model_.flat_grads();
    all_reduce_in_buckets(reduced);
  } else if (stage_ == 1) {
    partition_grads_ =
        backend_.zeros({layout_.partition_numel()}, DType::kF32, MemoryCategory::kWorkspace);
    GradientReducer reducer(backend_, comm_, layout_, zero_.reduce_bucket_size, false,
                            precision_.comm, exposed_, reduction_);
    Tensor& full = accumulator_.defined() ? accumulator_ : model_.flat_grads();
    for (size_t u = layout_.units().size(); u-- > 0;) {
      const UnitPartition& part = layout_.unit(u);
      reducer.add(u, held_ ? held_->unit(u) : full.view(part.flat_begin, {part.numel}),
                  partition_grads_);
    }
    reducer.flush(partition_grads_);
    if (held_) held_->clear();  // reduced into the partition: free them before the update
    reduced = partition_grads_;
  } else {
    reduced = partition_grads_;
    if (host_backend_) {
      reduce_on_host(scale, squared_norm);
      return;
    }
  }
  // The optimizer reads f32.
  if (reduced.dtype() == DType::kF32) {
    update_grads_f32_ = reduced;
  } else {
    update_grads_f32_ = backend_.empty({reduced.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    backend_.copy(update_grads_f32_, reduced);
  }
  // What the prescale before communication left of the averaging (nothing was prescaled when
  // the gradients stay local).
  const double post_scale = local_gradients_ ? scale : scale / reduction_.prescale;
  if (post_scale != 1.0) backend_.scale(update_grads_f32_, post_scale);
  // bf16_master_weights_and_grads: the optimizer's gradient partition is stored in bf16.
  if (precision_.master != DType::kF32) round_through(backend_, update_grads_f32_, precision_.master);
  backend_.sum_squares(squared_norm, update_grads_f32_, false);
  // Offload: the optimizer runs on the host; the partition goes down now, the norm stays on the
  // device for the step's one scalar read.
  if (host_backend_) backend_.copy_to_host(host_grads_.raw_data(), update_grads_f32_);
  // Stage 0: every rank holds the same reduced gradients, so its norm is already global.
  if (stage_ == 0) {
    if (local_gradients_) mean_of_local_norms(squared_norm);
    return;
  }
  ExposedScope blocked(exposed_);
  comm_.all_reduce(squared_norm, comm::ReduceOp::kSum);
}

void ZeroStage::set_local_gradients(bool local) {
  if (local && stage_ != 0) {
    throw ConfigError("1-bit Adam's local gradients need ZeRO stage 0 (zero_optimization.stage is " +
                      std::to_string(stage_) + ")");
  }
  local_gradients_ = local;
}

void ZeroStage::mean_of_local_norms(Tensor& squared_norm) {
  if (comm_.world_size() == 1) return;
  ExposedScope blocked(exposed_);
  comm_.all_reduce(squared_norm, comm::ReduceOp::kSum);
  backend_.scale(squared_norm, 1.0 / comm_.world_size());
}

void ZeroStage::all_reduce_in_buckets(Tensor& grads) {
  if (comm_.world_size() == 1 || local_gradients_) return;
  const int64_t bucket = std::max<int64_t>(zero_.reduce_bucket_size, 1);
  for (int64_t at = 0; at < grads.numel(); at += bucket) {
    Tensor piece = grads.view(at, {std::min(bucket, grads.numel() - at)});
    Tensor wire = piece;
    if (piece.dtype() != precision_.comm) {
      wire = backend_.empty({piece.numel()}, precision_.comm, MemoryCategory::kComm);
      backend_.copy(wire, piece);
    }
    if (reduction_.prescale != 1.0) backend_.scale(wire, reduction_.prescale);
    {
      ExposedScope blocked(exposed_);
      comm_.all_reduce(wire, comm::ReduceOp::kSum);
    }
    if (wire.raw_data() != piece.raw_data()) backend_.copy(piece, wire);
  }
}

void ZeroStage::reduce_held_gradients(double scale, Tensor& squared_norm) {
  // The flat path's operations per element (sum over ranks in rank order, the remaining scale),
  // unit by unit; the norm adds the units' squared sums in unit order.
  const double post_scale = local_gradients_ ? scale : scale / reduction_.prescale;
  // Nothing to reduce or scale: a unit's sum of squares taken when its gradient was stored is
  // the one sum_squares would give now (the same bits), and is added in the same order.
  const bool communicated = comm_.world_size() > 1 && !local_gradients_;
  const bool stored_sums_hold = !communicated && post_scale == 1.0;
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    if (stored_sums_hold && held_->has_squared_norm(u)) {
      const Tensor unit_sum = held_->squared_norm(u);
      if (u == 0) {
        backend_.copy(squared_norm, unit_sum);
      } else {
        backend_.add(squared_norm, unit_sum, 1.0);
      }
      continue;
    }
    Tensor grads = held_->unit(u);
    all_reduce_in_buckets(grads);
    if (post_scale != 1.0) backend_.scale(grads, post_scale);
    backend_.sum_squares(squared_norm, grads, u > 0);
  }
  // Stage 0: every rank holds the same reduced gradients, so the norm is already global.
  if (local_gradients_) mean_of_local_norms(squared_norm);
  held_reduced_ = true;
}

void ZeroStage::reduce_on_host(double scale, Tensor& squared_norm) {
  // Stages 2-3 under offload: the summed gradient partition is already in host memory; the
  // same conversions and scaling as the device path, on the host, and only the norm goes up.
  backend::Backend& host = *host_backend_;
  host.copy(host_grads_, partition_grads_);
  const double post_scale = scale / reduction_.prescale;
  if (post_scale != 1.0) host.scale(host_grads_, post_scale);
  update_grads_f32_ = host_grads_;
  // Partial offload: the device part's gradients go back up for its update on the device.
  if (split_ > 0) backend_.copy_from_host(grads_device_, host_grads_.raw_data());
  Tensor norm = host.zeros({1}, DType::kF64, MemoryCategory::kWorkspace);
  host.sum_squares(norm, host_grads_, false);
  backend_.copy_from_host(squared_norm, norm.raw_data());
  ExposedScope blocked(exposed_);
  comm_.all_reduce(squared_norm, comm::ReduceOp::kSum);
}

std::vector<std::string> ZeroStage::nonfinite_gradient_names(size_t limit) const {
  std::vector<std::string> names;
  if (!update_grads_f32_.defined() && !held_reduced_) return names;
  auto check = [&](const model::Parameter* p, int64_t offset, int64_t count) {
    if (names.size() >= limit) return;
    if (!names.empty() && names.back() == p->spec.name) return;
    const Tensor piece = held_reduced_ ? held_->view(offset, count)
                                       : update_grads_f32_.view(offset, {count});
    // Stages 2-3 under offload reduce on the host (reduce_on_host).
    const bool on_host = host_backend_ && stage_ >= 2;
    if (!std::isfinite((on_host ? *host_backend_ : backend_).squared_norm(piece))) {
      names.push_back(p->spec.name);
    }
  };
  if (stage_ == 0) {
    for (model::Parameter* p : model_.parameters()) check(p, p->flat_offset, p->numel());
  } else {
    for (const ParamSlice& slice : layout_.slices()) {
      check(slice.param, slice.partition_offset, slice.count);
    }
  }
  return names;
}

Tensor& ZeroStage::update_params() {
  if (stage_ == 0 && !precision_.mixed()) return model_.flat_params();
  if (split_ > 0 && master_host_stale_) {
    // Partial offload: the device part's master weights, mirrored into the host partition.
    backend_.copy_to_host(master_.raw_data(), master_device_);
    master_host_stale_ = false;
  }
  if (master_.dtype() == DType::kF32) return master_;
  if (!master_f32_.defined()) {
    master_f32_ = backend_.empty({master_.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    backend_.copy(master_f32_, master_);
  }
  return master_f32_;
}

void ZeroStage::commit_master(int64_t step) {
  if (!precision_.stochastic_rounding) {
    backend_.copy(master_, master_f32_);  // round-to-nearest-even
  } else {
    // One random stream per step; each element's bits come from its place in the model, so the
    // result does not depend on the world size or the stage. Padding elements belong to no
    // slice: they stay zero in master_ (zero gradient, zero update).
    const auto seed = static_cast<uint64_t>(step);
    for (const ParamSlice& slice : layout_.slices()) {
      Tensor target = master_.view(slice.partition_offset, {slice.count});
      const Tensor source = master_f32_.view(slice.partition_offset, {slice.count});
      backend_.stochastic_round_to_bf16(target, source, seed,
                                        slice.param->flat_offset + slice.param_offset);
    }
  }
  master_f32_ = Tensor();
}

Tensor& ZeroStage::update_grads() {
  ZERO_CHECK(!held_reduced_, "update_grads() at stage 0 with held unit gradients: use "
                             "update_pieces() or reduced_gradient()");
  ZERO_CHECK(update_grads_f32_.defined(), "update_grads() before reduce_gradients()");
  return host_backend_ ? host_grads_ : update_grads_f32_;
}

std::vector<backend::UpdatePiece> ZeroStage::update_pieces() {
  if (held_reduced_) return held_->pieces();
  const std::span<const backend::ParamSegment> segments = update_segments();
  return {backend::UpdatePiece{0, update_grads(), {segments.begin(), segments.end()}}};
}

Tensor ZeroStage::reduced_gradient(int64_t offset, int64_t count) {
  if (held_reduced_) return held_->view(offset, count);
  return update_grads().view(offset, {count});
}

std::span<const backend::ParamSegment> ZeroStage::update_segments() const {
  return stage_ == 0 ? std::span<const backend::ParamSegment>(full_segments_)
                     : std::span<const backend::ParamSegment>(layout_.segments());
}

int64_t ZeroStage::update_numel() const {
  return stage_ == 0 ? model_.num_parameters() : layout_.partition_numel();
}

void ZeroStage::gather_into(Tensor& full, const std::function<Tensor(size_t, size_t)>& shards) {
  const size_t units = layout_.units().size();
  const int64_t bucket = std::max<int64_t>(zero_.allgather_bucket_size, 1);
  size_t first = 0;
  while (first < units) {
    size_t last = first;
    int64_t elements = layout_.unit(first).padded_numel;
    while (last + 1 < units && elements + layout_.unit(last + 1).padded_numel <= bucket) {
      ++last;
      elements += layout_.unit(last).padded_numel;
    }
    const Tensor input = shards(first, last);
    ZERO_CHECK(input.numel() * layout_.world_size() == elements,
               "gather of units " << first << ".." << last << ": " << input.numel() << " shard elements");
    Tensor staging = backend_.empty({elements}, input.dtype(), MemoryCategory::kComm);
    {
      ExposedScope blocked(exposed_);
      comm_.all_gather(input, staging);
    }
    std::vector<Tensor> targets;
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout_.unit(u);
      targets.push_back(full.view(part.flat_begin, {part.numel}));
    }
    unpack_unit_shards(backend_, layout_, first, last, staging, targets);
    first = last + 1;
  }
}

Tensor* ZeroStage::fused_param_copy() {
  const bool eligible = precision_.mixed() && host_backend_ == nullptr && split_ == 0 &&
                        master_.defined() && master_.dtype() == DType::kF32;
  if (!eligible) return nullptr;
  if (stage_ == 0) {
    const bool whole = param_storage_.defined() && param_storage_.numel() == master_.numel();
    return whole ? &param_storage_ : nullptr;
  }
  if (stage_ == 3) {
    // The device tier's partition is a view: the update writes the stored values directly.
    if (partition_store_->tier() != config::OffloadDevice::kNone) return nullptr;
    partition_copy_ = partition_store_->read(0, layout_.units().size() - 1);
    return &partition_copy_;
  }
  if (!partition_copy_.defined()) {
    partition_copy_ =
        backend_.empty({layout_.partition_numel()}, precision_.param, MemoryCategory::kComm);
    // The update writes the segments; the padding between them must be the master's zeros.
    int64_t at = 0;
    const auto zero_until = [&](int64_t end) {
      if (end > at) {
        Tensor gap = partition_copy_.view(at, {end - at});
        backend_.fill(gap, 0.0);
      }
    };
    for (const backend::ParamSegment& s : layout_.segments()) {
      zero_until(s.offset);
      at = std::max(at, s.offset + s.length);
    }
    zero_until(layout_.partition_numel());
  }
  return &partition_copy_;
}

void ZeroStage::publish_parameters(int64_t step) {
  if (master_f32_.defined()) commit_master(step);
  const bool mixed = precision_.mixed();
  if (stage_ == 3) {
    if (split_ > 0) {
      if (master_device_stale_) {  // a checkpoint was loaded into update_params()
        backend_.copy_from_host(master_device_, master_.raw_data());
        master_device_stale_ = false;
      }
      const size_t units = layout_.units().size();
      partition_store_->write(0, device_units_ - 1, master_device_);  // rounds to the dtype
      if (device_units_ < units) {
        const Tensor& host = host_partition_in(precision_.param);
        partition_store_->write_from_host(device_units_, units - 1,
                                          host.view(split_, {host.numel() - split_}));
      }
    } else if (host_backend_) {
      // The CPU step's result goes to the partition's tier straight from host memory.
      partition_store_->write_from_host(0, layout_.units().size() - 1,
                                        host_partition_in(precision_.param));
    } else if (!param_copy_fresh_) {
      partition_store_->write(0, layout_.units().size() - 1, master_);  // rounds to the dtype
    }
  } else if (stage_ == 0 && mixed) {
    // Rounds to the parameters' dtype; under offload the upload comes first. Skipped when the
    // update wrote the rounded copy itself (fused_param_copy).
    if (!param_copy_fresh_) {
      backend_.copy(param_storage_, host_backend_ ? master_on_device(param_storage_.dtype()) : master_);
    }
    param_copy_fresh_ = false;
  } else if (stage_ == 1 || stage_ == 2) {
    const DType dtype = mixed ? precision_.param : DType::kF32;
    const Tensor partition = param_copy_fresh_ ? partition_copy_ : master_on_device(dtype);
    const auto shards = [&](size_t first, size_t last) {
      const int64_t begin = layout_.unit(first).partition_offset;
      return partition.view(begin, {layout_.unit(last).partition_offset +
                                    layout_.unit(last).shard_numel - begin});
    };
    // The updated shards travel in the parameters' dtype, as DeepSpeed all-gathers them.
    gather_into(mixed ? param_storage_ : model_.flat_params(), shards);
  }
  param_copy_fresh_ = false;
  partition_copy_ = Tensor();
  if (fetcher_) fetcher_->invalidate();
}

void ZeroStage::gather_parameters(Tensor& full) {
  ZERO_CHECK(full.numel() == model_.num_parameters() && full.dtype() == DType::kF32,
             "gather_parameters needs f32[" << model_.num_parameters() << "], got " << full.describe());
  if (stage_ <= 2) {
    backend_.copy(full, precision_.mixed() ? param_storage_ : model_.flat_params());
    return;
  }
  backend_.fill(full, 0.0);
  gather_into(full, [&](size_t first, size_t last) { return partition_store_->read(first, last); });
}

void ZeroStage::zero_grad() {
  model_.zero_grad();
  if (accumulator_.defined()) backend_.fill(accumulator_, 0.0);
  if (held_) held_->clear();
  held_reduced_ = false;
  if (stage_ == 1) partition_grads_ = Tensor();
  if (stage_ >= 2) grads_backend().fill(partition_grads_, 0.0);
  update_grads_f32_ = Tensor();
}

}  // namespace zero::sharding
