// ZeroStage: the ZeRO stage behaviour (0-3, DeepSpeed semantics) for one model on one
// data-parallel group. The Engine calls it around micro-steps and at the accumulation boundary;
// as the model's UnitObserver it gathers/releases parameters (stage 3) and reduce-scatters each
// unit's gradients as soon as its backward is done (stages 2-3).
//
//   stage 0: full parameters, gradients and optimizer state on every rank; gradients are
//            all-reduced in buckets of reduce_bucket_size at the boundary.
//   stage 1: fp32 master weights and optimizer state partitioned; full gradients reduce-
//            scattered to their owners at the boundary; updated shards all-gathered into the
//            full parameters (allgather_bucket_size).
//   stage 2: gradients partitioned too: bucketed reduce-scatter during backward (overlapped
//            when overlap_comm), accumulated into the rank's partition.
//   stage 3: parameters partitioned too, gathered per unit around its forward and backward
//            (parameter_fetcher.h).
//
// Numerics: every micro-batch gradient is computed into zeroed storage and summed into the
// accumulator (over micro-steps, and over ranks in rank order by the Comm), then scaled once by
// 1/(gradient_accumulation_steps * N). So N ranks with one micro-step each reproduce, bit for
// bit, one rank accumulating the same N micro-batches in rank order.
//
// Memory (accounted): stage 0: P + G + K; stage 1: P + G + K/N; stage 2: P + (G+K)/N; stage 3:
// (P+G+K)/N, where K includes the fp32 master weights whenever they are not the parameters
// themselves (stages >= 1, or 16-bit parameters; DeepSpeed keeps them too). With
// gradient_accumulation_steps > 1, f32 stages 0-1 keep a second full gradient buffer (the
// accumulator). In 16-bit training stages 0-1 hold G unit by unit (held_unit_gradients.h): it
// exists from each unit's backward to zero_grad(), not during the forward. Transient buckets,
// gathered units and f32 working copies are kComm.
//
// Precision (precision.h): with 16-bit parameters they are stored in 16 bits (the full flat
// buffer at stages 0-2, the partition at stage 3) and each unit runs on an f32 working copy;
// each micro-batch's unit gradients are rounded to 16 bits, accumulated in the accumulation
// dtype and communicated in the communication dtype; the optimizer always sees f32. With bf16
// master weights (precision.master) the partition of master weights and the reduced gradients
// are stored in bf16: update_params() is then an f32 working copy that publish_parameters()
// commits back (round-to-nearest-even or stochastic rounding) and frees.
//
// Optimizer offload (zero_optimization.offload_optimizer.device "cpu", stages 1-3; DeepSpeed's
// ZeRO-Offload): the f32 master partition and the reduced f32 gradient partition live in host
// memory (pinned when pin_memory), the optimizer's state too (optimizer_backend() is a host
// CPU backend), and the device keeps only the parameters (and, at stage 1, gradients). At
// stages 2-3 each reduced bucket is copied down as backward produces it and accumulated in a
// host gradient partition, where reduce_gradients() scales it and takes the norm (only the
// norm goes up); at stage 1 reduce_gradients() reduces on the device and copies the partition
// down;
// publish_parameters() uploads the updated partition in the parameters' dtype (the CPU step
// writes that 16-bit copy in its pass: offload_param_copy()). With device "nvme" the same holds,
// and the engine keeps the optimizer's state in files on the NVMe drive (engine/nvme_state.h).
//
// Parameter offload (zero_optimization.offload_param, stage 3 only; DeepSpeed's ZeRO-Offload /
// ZeRO-Infinity of parameters): the stage-3 partition lives in host memory or on NVMe
// (partition_store.h) and reaches the device unit by unit for each gather; publish_parameters()
// writes the updated partition back there (from host memory directly under optimizer offload).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "comm/comm.h"
#include "config/aio_config.h"
#include "config/zero_config.h"
#include "model/model.h"
#include "sharding/gradient_reducer.h"
#include "sharding/held_unit_gradients.h"
#include "sharding/parameter_fetcher.h"
#include "sharding/partition_layout.h"
#include "sharding/partition_store.h"
#include "sharding/precision.h"
#include "sharding/zero_plus_plus.h"

namespace zero::sharding {

class ZeroStage final : public model::UnitObserver {
 public:
  // Takes over the model's storage as the stage requires (the model's current parameter values
  // become the initial partitions; a model built partitioned - Model::finalize_partitioned,
  // stage 3 only - gives its values unit by unit and never exists whole). `comm` is the
  // data-parallel group; both must outlive this.
  // `gradient_prescale` multiplies gradients before they are communicated (DeepSpeed's
  // prescale_gradients / gradient_predivide_factor; reduce_gradients applies the rest of its
  // scale afterwards); it has no effect on one rank, where nothing is communicated.
  ZeroStage(model::Model& model, comm::Comm& comm, const config::ZeroConfig& zero,
            int64_t gradient_accumulation_steps, Precision precision = {},
            double gradient_prescale = 1.0, const config::AioConfig& aio = {});
  ~ZeroStage() override;

  int stage() const { return stage_; }
  const PartitionLayout& layout() const { return layout_; }
  const Precision& precision() const { return precision_; }

  // ---- the micro-step ------------------------------------------------------------------
  // Before forward: `with_backward` false for evaluation.
  void begin_pass(bool with_backward);
  // After backward (or after an evaluation forward): finishes this micro-batch's gradient.
  void end_pass(bool had_backward);

  // ---- the boundary --------------------------------------------------------------------
  // Reduces gradients to their owners and scales them by `scale`; writes the global squared L2
  // norm of the result into `squared_norm` (f64 [1] on the backend's device; all ranks agree;
  // non-finite when any rank's gradients overflowed). Nothing is read on the host: the engine
  // reads the norm with the loss in its one read per step.
  void reduce_gradients(double scale, Tensor& squared_norm);
  // Stage 0, 1-bit Adam's compressed stage (optim/optimizer.h): while set, reduce_gradients()
  // leaves each rank's gradients its own - no all-reduce, and `scale` then carries no 1/world -
  // and writes as the squared norm the mean over ranks of each rank's own squared norm, so every
  // rank takes the same overflow and clipping decisions. ConfigError at stages 1-3.
  void set_local_gradients(bool local);
  // Test hook: the next reduce_gradients() writes NaN into this rank's first gradient element:
  // before the reduction at stages 0-1, into its reduced partition at stages 2-3 (an overflow
  // only this rank sees before the norm's all-reduce).
  void poison_next_reduction() { poison_next_reduction_ = true; }
  // Stages 0-1, between the last end_pass() and reduce_gradients(): the view of this rank's
  // micro-batch-summed, not yet reduced gradient of `p` (its unit's held gradient, or the
  // accumulator when there is one, else the model's gradient) - where a pipeline all-reduces
  // tied parameters' gradients.
  Tensor accumulated_gradient(const model::Parameter& p) {
    if (held_) return held_->view(p.flat_offset, p.numel()).view(0, p.spec.shape);
    return accumulator_.defined() ? accumulator_.view(p.flat_offset, p.spec.shape) : p.grad;
  }
  // The parameters (in model order) whose reduced gradients on this rank hold Inf/NaN, at most
  // `limit` of them (for overflow diagnostics; call after reduce_gradients).
  std::vector<std::string> nonfinite_gradient_names(size_t limit) const;
  // The buffers the optimizer updates (full model at stage 0, this rank's partition above) and
  // its segments in their coordinates.
  // update_grads() is the one flat gradient buffer; at stage 0 in 16-bit training the gradients
  // are held per unit (held_unit_gradients.h) and there is none: read them through
  // update_pieces() (the optimizer) or reduced_gradient() (norms of parameter ranges).
  Tensor& update_params();
  Tensor& update_grads();
  // The update as pieces with their own gradient tensors (one piece: update_grads() whole).
  std::vector<backend::UpdatePiece> update_pieces();
  // After reduce_gradients(): the reduced f32 gradients of update elements [offset,
  // offset + count) (one parameter's range or part of it), on optimizer_backend().
  Tensor reduced_gradient(int64_t offset, int64_t count);
  // The backend the optimizer runs on and its buffers live on: this stage's backend, or the
  // host CPU backend under optimizer offload.
  backend::Backend& optimizer_backend() { return host_backend_ ? *host_backend_ : backend_; }
  bool offloads_optimizer() const { return host_backend_ != nullptr; }
  // Under offload with 16-bit parameters: the host buffer the CPU step writes the partition's
  // 16-bit copy into (undefined otherwise). Call offloaded_step_done() after writing it, so
  // publish_parameters() uploads it instead of converting the master weights again.
  Tensor& offload_param_copy() { return host_param_copy_; }
  void offloaded_step_done() { host_param_copy_fresh_ = true; }
  // 16-bit parameters with f32 master weights updated on this stage's backend: the 16-bit buffer
  // the optimizer update writes in the same pass (Backend::optimizer_update_with_copy), whose
  // elements no segment covers already hold the rounded master weights. Stage 0: the parameters
  // themselves. Stages 1-2: a transient partition buffer (padding zeroed) that
  // publish_parameters() all-gathers instead of converting the master partition. Stage 3 with
  // the partition on the device: the stored partition itself. Null otherwise (offload, partial
  // offload, bf16 master weights, 32-bit parameters). Call param_copy_written() after such an
  // update, so publish_parameters() does not convert the master weights again.
  Tensor* fused_param_copy();
  void param_copy_written() { param_copy_fresh_ = true; }
  std::span<const backend::ParamSegment> update_segments() const;

  // ---- partial optimizer offload (offload_optimizer.ratio < 1, stage 3 only) --------------
  // Partition elements [0, device_update_numel()) - whole units, DeepSpeed's first sub-groups -
  // keep their f32 master weights on the device and update there (device_master(),
  // device_grads() after reduce_gradients(), device_segments()); the rest update on the host:
  // host_master(), host_grads(), host_segments() (offsets relative to the split). The host
  // partition buffers stay full-length so checkpoints see one partition: update_params()
  // first mirrors the device part into it, and a loader that wrote into update_params() calls
  // update_params_written() so publish_parameters() uploads it. device_part_updated() after
  // each device update.
  int64_t device_update_numel() const { return split_; }
  Tensor& device_master() { return master_device_; }
  Tensor& device_grads() { return grads_device_; }
  std::span<const backend::ParamSegment> device_segments() const { return device_segments_; }
  std::span<const backend::ParamSegment> host_segments() const { return host_segments_; }
  Tensor host_master() { return master_.view(split_, {master_.numel() - split_}); }
  Tensor host_grads() { return host_grads_.view(split_, {host_grads_.numel() - split_}); }
  void device_part_updated() { master_host_stale_ = split_ > 0; }
  void update_params_written() { master_device_stale_ = split_ > 0; }
  int64_t update_numel() const;
  // After the optimizer step: commits update_params() to bf16 master weights when they are
  // bf16 (stochastic rounding draws its bits from `step`, the optimizer step number) and makes
  // the model see the new values (all-gather at stages 1-2, refresh the partition at stage 3).
  void publish_parameters(int64_t step = 0);
  // Zeroes gradients (after publish, or to drop a skipped step).
  void zero_grad();
  // Writes the current full parameters into `full` (num_parameters() elements, the model's flat
  // layout) on every rank. Collective at stages >= 1: every rank must call it.
  void gather_parameters(Tensor& full);

  // Checkpoint loading writes into update_params() (pieces per layout().slices() at stages
  // >= 1) and then calls publish_parameters().

  // Stage 3: where the parameter partition lives (null below stage 3).
  const PartitionStore* partition_store() const { return partition_store_.get(); }

  // Stage 3: the most parameter elements gathered at once since the last reset.
  int64_t peak_live_elements() const { return fetcher_ ? fetcher_->peak_live_elements() : 0; }
  void reset_peak_live() {
    if (fetcher_) fetcher_->reset_peak();
  }

  // ZeRO++ (zero_plus_plus.h) as in effect; the hpZ group (null without hpZ) and the most
  // elements of secondary slices held at once since the last reset_peak_live().
  const ZeroPlusPlus& zero_plus_plus() const { return zero_plus_plus_; }
  comm::Comm* hpz_group() { return hpz_group_.get(); }
  // hpZ with qgZ: the ranks holding this rank's place in every hpZ group (the second hop of the
  // hierarchical gradient exchange); null otherwise.
  comm::Comm* qgz_column_group() { return qgz_column_group_.get(); }
  int64_t peak_secondary_elements() const {
    return fetcher_ ? fetcher_->peak_secondary_elements() : 0;
  }

  // Wall time this rank spent blocked on communication since construction (exposed_comm_time.h).
  double exposed_comm_seconds() const { return exposed_.seconds; }

  // UnitObserver
  void before_forward(size_t unit) override;
  void after_forward(size_t unit) override;
  void before_backward(size_t unit) override;
  void after_backward(size_t unit) override;

 private:
  void copy_shards_from_full(const Tensor& full, Tensor& partition);
  // All-gathers this rank's shards (any dtype) into `full` (the flat layout), in buckets of
  // consecutive units; `shards(first, last)` gives the bucket's shards as one device tensor.
  void gather_into(Tensor& full, const std::function<Tensor(size_t, size_t)>& shards);
  // Construction of a model built partitioned (zero.Init): this rank's shards of the initial
  // values into master_, unit by unit.
  void fill_master_from(model::UnitValueSource& values);
  // Under optimizer offload: the updated partition in host memory in `dtype` (the f32 master, or
  // the 16-bit copy the CPU step wrote, converted here when it is not fresh).
  const Tensor& host_partition_in(DType dtype);
  void accept_unit_gradient(size_t unit);
  // Stage 0 with more than one rank: all-reduces `grads` (any floating dtype) in pieces of
  // reduce_bucket_size elements travelling in the communication dtype.
  void all_reduce_in_buckets(Tensor& grads);
  // Local gradients: the group's mean of each rank's squared norm, in place.
  void mean_of_local_norms(Tensor& squared_norm);
  // reduce_gradients() at stage 0 with held unit gradients: unit by unit.
  void reduce_held_gradients(double scale, Tensor& squared_norm);
  // Sets up optimizer offload (constructor): checks the settings and creates the host backend
  // (its allocator is the pinned or pageable host memory the offloaded state lives in); then
  // moves master_ to host memory.
  void create_host_backend();
  void offload_master();
  // Partial offload (constructor, before master_ moves to the host): the split and the device
  // part's buffers.
  void keep_device_part();
  // Where the stage-2/3 gradient partition lives: the host under optimizer offload.
  backend::Backend& grads_backend() const { return host_backend_ ? *host_backend_ : backend_; }
  // reduce_gradients() at stages 2-3 under optimizer offload.
  void reduce_on_host(double scale, Tensor& squared_norm);
  // The master partition on the device in `dtype` (a fresh upload under offload).
  Tensor master_on_device(DType dtype);
  // Rounds master_f32_ into the bf16 master_ and frees it.
  void commit_master(int64_t step);
  bool params_by_unit() const { return fetcher_ != nullptr; }
  bool grads_by_unit() const { return stage_ >= 2 || precision_.mixed(); }

  model::Model& model_;
  backend::Backend& backend_;
  comm::Comm& comm_;
  config::ZeroConfig zero_;
  int stage_;
  int64_t accumulation_steps_;
  PartitionLayout layout_;
  Precision precision_;
  std::vector<std::vector<size_t>> needs_;    // per unit: units whose parameters it uses
  std::vector<size_t> last_backward_user_;    // per unit: the unit whose backward finishes it
  std::vector<backend::ParamSegment> full_segments_;

  Tensor accumulator_;        // stages 0-1: summed micro-batch gradients (accum dtype), when
                              // they are neither the model's own f32 gradient buffer nor held
  std::unique_ptr<HeldUnitGradients> held_;  // stages 0-1 in 16-bit training, f32 accumulation
  bool held_reduced_ = false;  // stage 0 with held_: reduce_gradients() ran since zero_grad()
  Tensor master_;             // master weights (precision.master): the partition (stages >= 1)
                              // or the full flat buffer (stage 0 with 16-bit parameters)
  Tensor master_f32_;         // bf16 master weights only: the f32 copy the optimizer updates,
                              // alive from update_params() to publish_parameters()
  Tensor partition_grads_;    // stages >= 1: this rank's reduced gradients (accum dtype)
  Tensor update_grads_f32_;   // the f32 gradients the optimizer reads, when a conversion is needed
  Tensor param_storage_;      // 16-bit full parameters (stages 0-2 with 16-bit parameters)
  bool param_copy_fresh_ = false;  // the update wrote fused_param_copy()
  Tensor partition_copy_;     // fused_param_copy() at stages 1-3 (a view of the store at 3)
  std::unique_ptr<PartitionStore> partition_store_;  // stage 3: the parameter partition
  std::vector<Tensor> unit_grads_;  // per-unit f32 gradient buffers during backward
  std::unique_ptr<GradientReducer> reducer_;
  ReductionOptions reduction_;  // reduce_scatter and the prescale (1 on one rank)
  std::unique_ptr<backend::Backend> host_backend_;  // optimizer offload only
  Tensor host_grads_;           // offload: the f32 gradient partition on the host
  Tensor host_param_copy_;      // offload with 16-bit parameters: the partition's 16-bit copy
  bool host_param_copy_fresh_ = false;
  int64_t split_ = 0;              // partial offload: elements updated on the device
  size_t device_units_ = 0;        // ... which are the first device_units_ units' shards
  Tensor master_device_;           // f32 [split_] on the device
  Tensor grads_device_;            // f32 [split_] on the device
  std::vector<backend::ParamSegment> device_segments_;
  std::vector<backend::ParamSegment> host_segments_;
  bool master_host_stale_ = false;    // master_[0, split_) older than master_device_
  bool master_device_stale_ = false;  // master_device_ older than master_[0, split_)
  ZeroPlusPlus zero_plus_plus_;                // stage 3 on several ranks only
  std::unique_ptr<comm::Comm> hpz_group_;      // hpZ: this rank's secondary group (its node)
  std::unique_ptr<comm::Comm> qgz_column_group_;  // hpZ + qgZ: this place in every node
  std::unique_ptr<ParameterFetcher> fetcher_;
  bool in_training_pass_ = false;
  bool local_gradients_ = false;
  bool poison_next_reduction_ = false;
  ExposedCommTime exposed_;
};

}  // namespace zero::sharding
