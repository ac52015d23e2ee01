// Optimizer: DeepSpeed's basic optimizers (Adam, AdamW, Lamb, Lion, Adagrad), 1-bit Adam
// (OneBitAdam) and Muon over one flat f32 parameter buffer, with their state in accounted
// buffers (MemoryCategory::kOptimizer) of f32, or of bf16 with bf16.bf16_optimizer_states. The
// elementwise math runs through Backend::optimizer_update in f32 (bf16 states are widened for
// the update and rounded back to nearest-even, as a GPU kernel reading and writing bf16 does);
// this class owns the hyper-parameters with DeepSpeed's names and defaults, the step count and
// the state.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "comm/compressed_all_reduce.h"
#include "optim/muon.h"

namespace zero::optim {

class JsonParams;

// The config's optimizer block: {"type": ..., "params": {...}}.
struct OptimizerSpec {
  std::string type;
  nlohmann::json params = nlohmann::json::object();
};

class Optimizer {
 public:
  // Validates type (case-insensitive, DeepSpeed spellings) and params (unknown keys and bad
  // values throw ConfigError naming "<source>.params.<key>").
  static std::unique_ptr<Optimizer> create(const OptimizerSpec& spec, const std::string& source);

  const std::string& type() const { return type_; }
  // Allocates zeroed state for `numel` elements on `backend`, stored in `dtype` (f32 or bf16).
  void init_state(backend::Backend& backend, int64_t numel, DType dtype = DType::kF32);
  // One update of `params` from `grads` over `segments` at learning rate `lr`, every gradient
  // multiplied by float(grad_scale) as it is read (gradient clipping folded into the update;
  // `grads` itself is left as it was). With `param_copy`, the updated elements are also stored
  // there rounded to its dtype (Backend::optimizer_update_with_copy's contract).
  void step(backend::Backend& backend, Tensor& params, const Tensor& grads,
            std::span<const backend::ParamSegment> segments, double lr, double grad_scale = 1.0,
            Tensor* param_copy = nullptr);
  // The same update with the gradients in pieces (held unit gradients): each piece updates the
  // views of params, state and param_copy at its offset; one step counted.
  void step(backend::Backend& backend, Tensor& params, std::span<const backend::UpdatePiece> pieces,
            double lr, double grad_scale = 1.0, Tensor* param_copy = nullptr);

  // ZeRO-Offload runs the update itself (offload/cpu_optimizer.h) over state_buffers() with
  // next_hyper(lr), then counts it with finish_external_step(lr): the same hyper-parameters and
  // step count as step() would have used.
  backend::OptimizerKind kind() const { return kind_; }
  backend::OptimizerHyper next_hyper(double lr) const {
    backend::OptimizerHyper h = hyper_;
    h.lr = lr;
    return h;
  }
  void finish_external_step(double lr) {
    hyper_.lr = lr;
    ++hyper_.step;
  }
  std::vector<Tensor>& state_buffers() { return state_; }
  // The names of the state buffers ("exp_avg", "exp_avg_sq", "sum_sq"), allocated or not.
  const std::vector<std::string>& state_names() const { return state_names_; }

  // ---- 1-bit Adam (OneBitAdam) ---------------------------------------------------------
  // Steps 1..freeze_step are Adam without bias correction over all-reduced gradients (the
  // warm-up that estimates the variance); every later step is the compressed stage: the
  // engine leaves each rank's gradients unreduced, step() moves this rank's momentum with them,
  // replaces it by the ranks' average through a 1-bit CompressedAllReduce over the group set by
  // set_compression_group (none, or a group of one: no communication), and updates the
  // parameters against the variance frozen at freeze_step.
  bool is_onebit() const { return onebit_; }
  // Whether the config's optimizer.type names 1-bit Adam (case-insensitive, as create() reads
  // it): what callers check before an Optimizer exists.
  static bool is_onebit_type(const std::string& type);
  int64_t freeze_step() const { return freeze_step_; }
  // Whether the next step() is a compressed one (its gradients must be this rank's own).
  bool next_step_compressed() const { return onebit_ && hyper_.step > freeze_step_; }
  // The data-parallel group the momentum is averaged over (must outlive this; resets errors).
  void set_compression_group(comm::Comm* group);
  // The compressed all-reduce with this rank's error-feedback buffers; null until the first
  // compressed step on more than one rank.
  comm::CompressedAllReduce* compression() { return compression_.get(); }
  // A checkpoint's error-feedback buffers for this rank (host f32 of the layout's worker and
  // server sizes), applied now or when the compressed all-reduce is first built; with none
  // (a checkpoint from another world size), the errors restart at zero as DeepSpeed's always do.
  // A size that does not fit the layout is a FileError naming `source`.
  void restore_compression_errors(std::optional<std::pair<Tensor, Tensor>> errors,
                                  const std::string& source);
  // Settings that were read but change nothing here, one line each, for the caller to print.
  const std::vector<std::string>& notes() const { return notes_; }

  // ---- Muon -------------------------------------------------------------------------------
  // Muon updates the matrices set by set_muon_units (optim/muon.h) and runs AdamW with bias
  // correction on every other element (DeepSpeed's MuonWithAuxAdam). State: exp_avg is Muon's
  // momentum on the matrices and Adam's first moment elsewhere; exp_avg_sq, Adam's second
  // moment, is held only for the elements outside the matrices (state_buffers()[1] is that
  // compact buffer; state_tensors() expands it to full length, zero on the matrices, and
  // states_loaded() takes a loaded expansion back). The schedule's lr scales both groups'
  // learning rates by lr / base_lr(), so muon_lr and adam_lr keep their ratio through warm-up and
  // decay.
  bool is_muon() const { return muon_; }
  static bool is_muon_type(const std::string& type);
  // The units holding Muon matrices, as this rank holds them, and the group that gathers the
  // units' updates (ZeRO's data-parallel group; it must outlive this; may be null when no unit
  // gathers). Each piece of a matrix this rank holds must be exactly one segment of step()'s.
  // Required before init_state().
  void set_muon_units(std::vector<MuonUnit> units, comm::Comm* group);
  // After a checkpoint was loaded into the tensors state_tensors() returned: takes them over
  // (Muon's expanded second moment back into its compact buffer; nothing for the others).
  void states_loaded(const std::vector<std::pair<std::string, Tensor>>& loaded);
  double muon_lr() const { return muon_lr_; }
  double adam_lr() const { return adam_lr_; }
  const MuonHyper& muon_hyper() const { return muon_hyper_; }

  int64_t step_count() const { return hyper_.step - 1; }
  void set_step_count(int64_t steps) { hyper_.step = steps + 1; }
  double base_lr() const { return hyper_.lr; }
  // OneCycle cycles the momentum: it sets (beta1, beta2) before each step.
  void set_betas(double beta1, double beta2) {
    hyper_.beta1 = beta1;
    hyper_.beta2 = beta2;
  }
  // Named full-length state buffers ("exp_avg", "exp_avg_sq", "sum_sq") in their storage dtype,
  // for checkpoints.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  nlohmann::json hyper_json() const;

 private:
  static void read_onebit_adam(Optimizer& opt, JsonParams& p, const std::string& source);
  static void read_muon(Optimizer& opt, JsonParams& p, const std::string& source);
  void muon_step(backend::Backend& backend, Tensor& params,
                 std::span<const backend::UpdatePiece> pieces, std::span<Tensor> state,
                 const backend::OptimizerHyper& hyper, Tensor* param_copy);
  // One backend update of `kind` over every piece (views of params, state and param_copy).
  static void update_pieces(backend::Backend& backend, backend::OptimizerKind kind,
                            Tensor& params, std::span<const backend::UpdatePiece> pieces,
                            std::span<Tensor> state, const backend::OptimizerHyper& hyper,
                            Tensor* param_copy);

  std::string type_;
  backend::OptimizerKind kind_ = backend::OptimizerKind::kAdam;
  backend::OptimizerHyper hyper_;
  std::vector<std::string> state_names_;
  std::vector<Tensor> state_;
  bool onebit_ = false;
  int64_t freeze_step_ = 0;
  comm::Comm* compression_group_ = nullptr;
  std::unique_ptr<comm::CompressedAllReduce> compression_;
  // Loaded errors waiting for compression_ (restore_compression_errors), and their file.
  std::optional<std::pair<Tensor, Tensor>> pending_errors_;
  std::string pending_errors_source_;
  void apply_pending_errors(backend::Backend& backend);
  std::vector<std::string> notes_;
  bool muon_ = false;
  MuonHyper muon_hyper_;
  double muon_lr_ = 0.0;
  double adam_lr_ = 0.0;
  double muon_reference_lr_ = 0.0;  // the lr the schedule starts from (base_lr())
  bool muon_units_set_ = false;
  std::vector<MuonUnit> muon_units_;
  comm::Comm* muon_group_ = nullptr;
  // The matrices' pieces this rank holds, [start, start + length) in update coordinates, sorted,
  // and the elements they cover: what the compact second moment leaves out.
  std::vector<std::pair<int64_t, int64_t>> muon_held_;
  int64_t muon_held_elements_ = 0;
  int64_t state_numel_ = 0;
  backend::Backend* state_backend_ = nullptr;
  // Where update element x (outside the matrices) sits in the compact second moment.
  int64_t compact_offset(int64_t x) const;
  // The runs of update elements outside the matrices: [start, start + length), in order.
  std::vector<std::pair<int64_t, int64_t>> adam_runs() const;
  // One unit's Muon update (muon_step): momentum of the pieces held here, the gather, the
  // orthogonalization of the overlapped matrices and their update.
  struct HeldRange;
  void muon_unit_step(backend::Backend& backend, const MuonUnit& unit, Tensor& params,
                      std::span<const backend::UpdatePiece> pieces,
                      const std::vector<HeldRange>& ranges, std::span<Tensor> state,
                      double lr, const backend::OptimizerHyper& hyper, Tensor* param_copy);
};

}  // namespace zero::optim
