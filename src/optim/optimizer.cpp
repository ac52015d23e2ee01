#include "optim/optimizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "optim/json_params.h"

namespace zero::optim {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

// DeepSpeed's OnebitAdam (deepspeed/runtime/fp16/onebit/adam.py): Adam without bias correction
// and with decoupled decay for freeze_step steps, then the compressed stage (step()).
void Optimizer::read_onebit_adam(Optimizer& opt, JsonParams& p, const std::string& source) {
  backend::OptimizerHyper& h = opt.hyper_;
  opt.kind_ = backend::OptimizerKind::kAdam;
  opt.onebit_ = true;
  h.lr = p.number("lr", 1e-3, true);
  std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.999);
  h.eps = p.number("eps", 1e-8, true);
  h.weight_decay = p.number("weight_decay", 0.0);
  h.bias_correction = false;
  h.adam_w_mode = true;
  opt.freeze_step_ = p.integer("freeze_step", 100000);
  if (opt.freeze_step_ < 1) {
    throw ConfigError(source + ".params.freeze_step = " + std::to_string(opt.freeze_step_) +
                      " must be >= 1: the compressed stage divides by the variance the warm-up "
                      "steps estimate, which is still zero before the first");
  }
  if (p.boolean("amsgrad", false)) {
    throw ConfigError(source + ".params.amsgrad = true: 1-bit Adam has no AMSGrad variant (nor "
                      "has DeepSpeed's); remove it");
  }
  if (p.number("max_grad_norm", 0.0) > 0.0) {
    throw UnsupportedError(source + ".params.max_grad_norm > 0 is not supported; use the "
                                    "top-level gradient_clipping instead");
  }
  // Keys DeepSpeed's OnebitAdam accepts but whose value changes nothing in its update.
  const bool bias_correction = p.boolean("bias_correction", true);
  const bool eps_inside_sqrt = p.boolean("eps_inside_sqrt", false);
  if (!bias_correction || eps_inside_sqrt) {
    opt.notes_.push_back(source + ".params: bias_correction and eps_inside_sqrt have no effect on "
                         "OneBitAdam (its update is m / (sqrt(v) + eps) without bias correction, "
                         "as in DeepSpeed)");
  }
  // The transport: zero.cpp sends the compressed momentum through the job's own Comm.
  p.boolean("cuda_aware", false);
  const std::string backend_name =
      p.choice("comm_backend_name", {"nccl", "mpi", "compressed", "hccl"});
  if (backend_name != "nccl") {
    opt.notes_.push_back(source + ".params.comm_backend_name = \"" + backend_name +
                         "\" does not choose the transport here: the compressed momentum goes "
                         "through the job's communicator (NCCL between GPUs, MPI otherwise)");
  }
  opt.state_names_ = {"exp_avg", "exp_avg_sq"};
}

bool Optimizer::is_onebit_type(const std::string& type) { return lower(type) == "onebitadam"; }

// DeepSpeed's Muon (deepspeed/runtime/zero/muon): MuonWithAuxAdam with the config's params split
// between its two groups - momentum (and nesterov, ns_steps, ns_method) for the Muon matrices,
// betas and eps for the Adam half, lr and weight_decay for both unless muon_lr / adam_lr say
// otherwise. Without lr, each group takes MuonWithAuxAdam's own default.
void Optimizer::read_muon(Optimizer& opt, JsonParams& p, const std::string& source) {
  backend::OptimizerHyper& h = opt.hyper_;
  opt.kind_ = backend::OptimizerKind::kAdam;
  opt.muon_ = true;
  const bool has_lr = p.has("lr");
  const double lr = p.number("lr", 0.02, true);
  opt.muon_lr_ = p.number("muon_lr", has_lr ? lr : 0.02, true);
  opt.adam_lr_ = p.number("adam_lr", has_lr ? lr : 3e-4, true);
  h.lr = has_lr ? lr : opt.muon_lr_;
  opt.muon_reference_lr_ = h.lr;
  MuonHyper& muon = opt.muon_hyper_;
  muon.momentum = p.number("momentum", 0.95);
  if (!(muon.momentum < 1.0)) {
    throw ConfigError(source + ".params.momentum = " + std::to_string(muon.momentum) +
                      " must be in [0, 1): the momentum keeps that share of itself each step");
  }
  muon.nesterov = p.boolean("nesterov", true);
  const int64_t ns_steps = p.integer("ns_steps", 5);
  if (ns_steps < 1 || ns_steps > 100) {
    throw ConfigError(source + ".params.ns_steps = " + std::to_string(ns_steps) +
                      " must be in [1, 100]: the Newton-Schulz iterations per update (5 is the "
                      "usual choice)");
  }
  muon.ns_steps = static_cast<int>(ns_steps);
  const bool gram_named = p.has("ns_method");
  if (p.choice("ns_method", {"gram", "standard"}) == "gram" && gram_named) {
    opt.notes_.push_back(source + ".params.ns_method = \"gram\" evaluates the same polynomial as "
                         "\"standard\", which zero.cpp runs (in f32); the updates agree up to "
                         "rounding");
  }
  std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.95);
  h.eps = p.number("eps", 1e-10, true);
  h.weight_decay = p.number("weight_decay", 0.0);
  h.bias_correction = true;
  h.adam_w_mode = true;
  opt.state_names_ = {"exp_avg", "exp_avg_sq"};
}

bool Optimizer::is_muon_type(const std::string& type) { return lower(type) == "muon"; }

void Optimizer::set_muon_units(std::vector<MuonUnit> units, comm::Comm* group) {
  for (const MuonUnit& unit : units) {
    ZERO_CHECK(unit.gather_numel == 0 || group != nullptr, "Muon units gather without a group");
  }
  muon_units_ = std::move(units);
  muon_group_ = group;
  muon_units_set_ = true;
  muon_held_.clear();
  muon_held_elements_ = 0;
  for (const MuonUnit& unit : muon_units_) {
    for (const MuonMatrix& m : unit.matrices) {
      const HeldElements piece = held_elements(unit, m);
      if (piece.empty()) continue;
      muon_held_.emplace_back(unit.update_offset + piece.begin - unit.local_begin, piece.count());
      muon_held_elements_ += piece.count();
    }
  }
  std::sort(muon_held_.begin(), muon_held_.end());
}

int64_t Optimizer::compact_offset(int64_t x) const {
  int64_t before = 0;
  for (const auto& [start, length] : muon_held_) {
    if (start >= x) break;
    ZERO_CHECK(start + length <= x, "element " << x << " lies inside a Muon matrix");
    before += length;
  }
  return x - before;
}

std::vector<std::pair<int64_t, int64_t>> Optimizer::adam_runs() const {
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t at = 0;
  for (const auto& [start, length] : muon_held_) {
    if (start > at) runs.emplace_back(at, start - at);
    at = start + length;
  }
  if (state_numel_ > at) runs.emplace_back(at, state_numel_ - at);
  return runs;
}

void Optimizer::states_loaded(const std::vector<std::pair<std::string, Tensor>>& loaded) {
  if (!muon_) return;
  for (const auto& [name, expanded] : loaded) {
    if (name != "exp_avg_sq") continue;
    ZERO_CHECK(expanded.numel() == state_numel_, "expanded second moment of " << expanded.numel());
    for (const auto& [start, length] : adam_runs()) {
      Tensor compact = state_[1].view(compact_offset(start), {length});
      state_backend_->copy(compact, expanded.view(start, {length}));
    }
  }
}

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerSpec& spec, const std::string& source) {
  auto opt = std::make_unique<Optimizer>();
  const std::string type = lower(spec.type);
  JsonParams p(spec.params, source + ".params");
  backend::OptimizerHyper& h = opt->hyper_;
  if (type == "adam" || type == "adamw") {
    // DeepSpeed's FusedAdam: "Adam" means AdamW (decoupled decay) unless adam_w_mode is false.
    opt->kind_ = backend::OptimizerKind::kAdam;
    h.lr = p.number("lr", 1e-3, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.999);
    h.eps = p.number("eps", 1e-8, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    h.bias_correction = p.boolean("bias_correction", true);
    h.adam_w_mode = type == "adamw" || p.boolean("adam_w_mode", true);
    p.accept("adam_w_mode");
    p.boolean("torch_adam", false);  // which kernel PyTorch would use; no effect here
    if (p.boolean("amsgrad", false)) {
      throw UnsupportedError(source + ".params.amsgrad = true is not supported yet by zero.cpp");
    }
    opt->state_names_ = {"exp_avg", "exp_avg_sq"};
  } else if (type == "lamb") {
    opt->kind_ = backend::OptimizerKind::kLamb;
    h.lr = p.number("lr", 1e-3, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.999);
    h.eps = p.number("eps", 1e-8, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    h.bias_correction = p.boolean("bias_correction", true);
    h.lamb_max_coeff = p.number("max_coeff", 10.0, true);
    h.lamb_min_coeff = p.number("min_coeff", 0.01);
    if (p.number("max_grad_norm", 0.0) > 0.0) {
      throw UnsupportedError(source + ".params.max_grad_norm > 0 is not supported yet; use the "
                                      "top-level gradient_clipping instead");
    }
    opt->state_names_ = {"exp_avg", "exp_avg_sq"};
  } else if (type == "lion") {
    opt->kind_ = backend::OptimizerKind::kLion;
    h.lr = p.number("lr", 1e-4, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.99);
    h.weight_decay = p.number("weight_decay", 0.0);
    opt->state_names_ = {"exp_avg"};
  } else if (type == "adagrad") {
    opt->kind_ = backend::OptimizerKind::kAdagrad;
    h.lr = p.number("lr", 1e-2, true);
    h.eps = p.number("eps", 1e-10, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    opt->state_names_ = {"sum_sq"};
  } else if (is_onebit_type(type)) {
    read_onebit_adam(*opt, p, source);
  } else if (is_muon_type(type)) {
    read_muon(*opt, p, source);
  } else if (type == "zerooneadam" || type == "onebitlamb" || type == "muadam" ||
             type == "muadamw" || type == "musgd") {
    throw UnsupportedError(source + ".type = \"" + spec.type + "\" is not supported yet by zero.cpp "
                                    "(supported: Adam, AdamW, Lamb, Lion, Adagrad, OneBitAdam, "
                                    "Muon)");
  } else {
    throw ConfigError(source + ".type = \"" + spec.type + "\" is not a DeepSpeed optimizer; use "
                      "Adam, AdamW, Lamb, Lion, Adagrad, OneBitAdam or Muon");
  }
  p.reject_unknown();
  opt->type_ = spec.type;
  return opt;
}

void Optimizer::init_state(backend::Backend& backend, int64_t numel, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    throw UnsupportedError(std::string("optimizer states in ") + dtype_name(dtype) +
                           " are not supported; use f32 or bf16");
  }
  state_.clear();
  compression_.reset();
  state_numel_ = numel;
  state_backend_ = &backend;
  for (size_t i = 0; i < state_names_.size(); ++i) {
    int64_t elements = numel;
    if (muon_ && i == 1) {
      // Muon's matrices keep no second moment.
      ZERO_CHECK(muon_units_set_, "Muon's state before set_muon_units");
      ZERO_CHECK(muon_held_.empty() || muon_held_.back().first + muon_held_.back().second <= numel,
                 "Muon matrices beyond the " << numel << " update elements");
      elements = numel - muon_held_elements_;
    }
    state_.push_back(backend.zeros({elements}, dtype, MemoryCategory::kOptimizer));
  }
}

void Optimizer::step(backend::Backend& backend, Tensor& params, const Tensor& grads,
                     std::span<const backend::ParamSegment> segments, double lr,
                     double grad_scale, Tensor* param_copy) {
  const backend::UpdatePiece whole{0, grads, {segments.begin(), segments.end()}};
  step(backend, params, std::span<const backend::UpdatePiece>(&whole, 1), lr, grad_scale,
       param_copy);
}

void Optimizer::step(backend::Backend& backend, Tensor& params,
                     std::span<const backend::UpdatePiece> pieces, double lr, double grad_scale,
                     Tensor* param_copy) {
  hyper_.lr = lr;
  backend::OptimizerHyper hyper = hyper_;
  hyper.grad_scale = grad_scale;
  // bf16 states update through f32 copies, rounded back afterwards.
  std::vector<Tensor> wide;
  const bool narrow = !state_.empty() && state_.front().dtype() != DType::kF32;
  if (narrow) {
    for (const Tensor& s : state_) {
      wide.push_back(backend.empty({s.numel()}, DType::kF32, MemoryCategory::kWorkspace));
      backend.copy(wide.back(), s);
    }
  }
  std::span<Tensor> state = narrow ? std::span<Tensor>(wide) : std::span<Tensor>(state_);
  if (muon_) {
    muon_step(backend, params, pieces, state, hyper, param_copy);
  } else if (next_step_compressed()) {
    // 1-bit Adam's compressed stage: each rank's momentum from its own gradients, their
    // compressed average, then the update against the variance frozen at freeze_step.
    update_pieces(backend, backend::OptimizerKind::kMomentum, params, pieces, state.first(1),
                  hyper, nullptr);
    if (compression_group_ != nullptr && compression_group_->world_size() > 1) {
      if (!compression_) {
        std::vector<backend::ParamSegment> segments;
        for (const backend::UpdatePiece& piece : pieces) {
          for (backend::ParamSegment s : piece.segments) {
            s.offset += piece.offset;
            segments.push_back(s);
          }
        }
        compression_ =
            std::make_unique<comm::CompressedAllReduce>(backend, *compression_group_, segments);
        apply_pending_errors(backend);
      }
      compression_->run(state[0]);
    }
    update_pieces(backend, backend::OptimizerKind::kFrozenVarianceAdam, params, pieces, state,
                  hyper, param_copy);
  } else {
    update_pieces(backend, kind_, params, pieces, state, hyper, param_copy);
  }
  if (narrow) {
    for (size_t i = 0; i < state_.size(); ++i) backend.copy(state_[i], wide[i]);
  }
  ++hyper_.step;
}

// A segment of step()'s pieces: where it starts in the update buffers, and where it came from.
struct Optimizer::HeldRange {
  int64_t start = 0;
  int64_t length = 0;
  size_t piece = 0;
  backend::ParamSegment segment;
};

void Optimizer::muon_step(backend::Backend& backend, Tensor& params,
                          std::span<const backend::UpdatePiece> pieces, std::span<Tensor> state,
                          const backend::OptimizerHyper& hyper, Tensor* param_copy) {
  ZERO_CHECK(muon_units_set_, "Muon's step before set_muon_units");
  const double ratio = hyper.lr / muon_reference_lr_;
  std::vector<HeldRange> ranges;
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (const backend::ParamSegment& segment : pieces[i].segments) {
      ranges.push_back({pieces[i].offset + segment.offset, segment.length, i, segment});
    }
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const HeldRange& a, const HeldRange& b) { return a.start < b.start; });
  // Every segment that is not a matrix's held piece is the auxiliary AdamW's. Consecutive ones
  // with no matrix between them update in one call: their elements are consecutive in the
  // compact second moment too.
  backend::OptimizerHyper adam = hyper;
  adam.lr = adam_lr_ * ratio;
  for (const backend::UpdatePiece& piece : pieces) {
    std::vector<backend::ParamSegment> segments(piece.segments.begin(), piece.segments.end());
    std::sort(segments.begin(), segments.end(),
              [](const backend::ParamSegment& a, const backend::ParamSegment& b) {
                return a.offset < b.offset;
              });
    std::vector<backend::ParamSegment> run;  // offsets relative to run_start
    int64_t run_start = 0, run_end = 0;
    auto flush = [&] {
      if (run.empty()) return;
      const int64_t n = run_end - run_start;
      Tensor p = params.view(run_start, {n});
      Tensor g = piece.grads.view(run_start - piece.offset, {n});
      std::array<Tensor, 2> run_state{state[0].view(run_start, {n}),
                                      state[1].view(compact_offset(run_start), {n})};
      if (param_copy != nullptr) {
        Tensor copy = param_copy->view(run_start, {n});
        backend.optimizer_update_with_copy(backend::OptimizerKind::kAdam, p, g, run_state, run,
                                           adam, copy);
      } else {
        backend.optimizer_update(backend::OptimizerKind::kAdam, p, g, run_state, run, adam);
      }
      run.clear();
    };
    for (const backend::ParamSegment& segment : segments) {
      const int64_t start = piece.offset + segment.offset;
      const auto held = std::lower_bound(muon_held_.begin(), muon_held_.end(),
                                         std::pair<int64_t, int64_t>{start, 0});
      if (held != muon_held_.end() && held->first == start) continue;  // a matrix's piece
      // A matrix between the run and this segment ends the run.
      if (!run.empty() && held != muon_held_.begin() && std::prev(held)->first >= run_end) {
        flush();
      }
      if (run.empty()) run_start = start;
      run.push_back({start - run_start, segment.length, segment.weight_decay});
      run_end = start + segment.length;
    }
    flush();
  }
  for (const MuonUnit& unit : muon_units_) {
    muon_unit_step(backend, unit, params, pieces, ranges, state, muon_lr_ * ratio, hyper,
                   param_copy);
  }
}

void Optimizer::muon_unit_step(backend::Backend& backend, const MuonUnit& unit, Tensor& params,
                               std::span<const backend::UpdatePiece> pieces,
                               const std::vector<HeldRange>& ranges, std::span<Tensor> state,
                               double lr, const backend::OptimizerHyper& hyper,
                               Tensor* param_copy) {
  const bool gathers = unit.gather_numel > 0;
  const int world = gathers ? muon_group_->world_size() : 1;
  const int64_t unit_elements = gathers ? unit.gather_numel * world : unit.local_count;
  ZERO_CHECK(!gathers || unit.local_begin == muon_group_->rank() * unit.gather_numel,
             "Muon unit shard at " << unit.local_begin << " on rank " << muon_group_->rank());
  // The unit's proposed updates in its own layout (element e of the unit at e); only the
  // matrices' elements are written and read, the rest stays zero.
  Tensor updates = backend.zeros({unit_elements}, DType::kF32, MemoryCategory::kWorkspace);
  struct Held {
    const MuonMatrix* matrix;
    int64_t lo;     // first held element, counted from the unit's first
    int64_t count;  // held elements
    const HeldRange* range;
  };
  std::vector<Held> held;
  for (const MuonMatrix& m : unit.matrices) {
    const HeldElements mine = held_elements(unit, m);
    if (mine.empty()) continue;
    const int64_t start = unit.update_offset + mine.begin - unit.local_begin;
    const auto range = std::lower_bound(
        ranges.begin(), ranges.end(), start,
        [](const HeldRange& r, int64_t offset) { return r.start < offset; });
    ZERO_CHECK(range != ranges.end() && range->start == start && range->length == mine.count(),
               "Muon matrix piece at " << start << " of " << mine.count()
                                       << " elements is not one optimizer segment");
    held.push_back({&m, mine.begin, mine.count(), &*range});
    Tensor p = params.view(start, {mine.count()});
    Tensor m_view = state[0].view(start, {mine.count()});
    Tensor u = updates.view(mine.begin, {mine.count()});
    const backend::UpdatePiece& piece = pieces[range->piece];
    muon_momentum(backend, p, piece.grads.view(range->segment.offset, {mine.count()}), m_view, u,
                  muon_hyper_, hyper.grad_scale);
  }
  if (gathers) {
    Tensor mine = updates.view(unit.local_begin, {unit.gather_numel});
    muon_group_->all_gather(mine, updates);
  }
  for (const Held& h : held) {
    const MuonMatrix& m = *h.matrix;
    Tensor matrix = updates.view(m.offset, {m.rows, m.cols});
    newton_schulz_orthogonalize(backend, matrix, muon_hyper_.ns_steps);
    const int64_t start = h.range->start;
    Tensor p = params.view(start, {h.count});
    Tensor copy;
    if (param_copy != nullptr) copy = param_copy->view(start, {h.count});
    muon_apply(backend, p, updates.view(h.lo, {h.count}), lr, hyper.weight_decay,
               h.range->segment.weight_decay, m.update_scale,
               param_copy != nullptr ? &copy : nullptr);
  }
}

void Optimizer::update_pieces(backend::Backend& backend, backend::OptimizerKind kind,
                              Tensor& params, std::span<const backend::UpdatePiece> pieces,
                              std::span<Tensor> state, const backend::OptimizerHyper& hyper,
                              Tensor* param_copy) {
  for (const backend::UpdatePiece& piece : pieces) {
    const int64_t n = piece.grads.numel();
    // The whole buffer needs no views (and keeps one launch for the one-piece case).
    const bool whole = piece.offset == 0 && n == params.numel();
    Tensor piece_params = whole ? params : params.view(piece.offset, {n});
    std::vector<Tensor> piece_state;
    for (Tensor& s : state) piece_state.push_back(whole ? s : s.view(piece.offset, {n}));
    if (param_copy != nullptr) {
      Tensor copy = whole ? *param_copy : param_copy->view(piece.offset, {n});
      backend.optimizer_update_with_copy(kind, piece_params, piece.grads, piece_state,
                                         piece.segments, hyper, copy);
    } else {
      backend.optimizer_update(kind, piece_params, piece.grads, piece_state, piece.segments,
                               hyper);
    }
  }
}

void Optimizer::restore_compression_errors(std::optional<std::pair<Tensor, Tensor>> errors,
                                           const std::string& source) {
  pending_errors_ = std::move(errors);
  pending_errors_source_ = source;
  if (!compression_) return;
  if (pending_errors_) {
    apply_pending_errors(compression_->backend());
  } else {
    compression_->reset_errors();
  }
}

void Optimizer::apply_pending_errors(backend::Backend& backend) {
  if (!pending_errors_) return;
  auto [worker, server] = std::move(*pending_errors_);
  pending_errors_.reset();
  Tensor& worker_error = compression_->worker_error();
  Tensor& server_error = compression_->server_error();
  if (worker.numel() != worker_error.numel() || server.numel() != server_error.numel() ||
      worker.dtype() != DType::kF32 || server.dtype() != DType::kF32) {
    throw FileError(pending_errors_source_ + ": 1-bit Adam's error buffers hold " +
                    std::to_string(worker.numel()) + " and " + std::to_string(server.numel()) +
                    " elements, this model and world size need f32 " +
                    std::to_string(worker_error.numel()) + " and " +
                    std::to_string(server_error.numel()) +
                    "; resume with the model and world size the checkpoint was saved with");
  }
  backend.copy_from_host(worker_error, worker.raw_data());
  backend.copy_from_host(server_error, server.raw_data());
}

void Optimizer::set_compression_group(comm::Comm* group) {
  compression_group_ = group;
  compression_.reset();
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (muon_ && i == 1) {
      // The compact second moment at its elements' places, zero on the matrices.
      Tensor expanded =
          state_backend_->zeros({state_numel_}, state_[i].dtype(), MemoryCategory::kWorkspace);
      for (const auto& [start, length] : adam_runs()) {
        Tensor place = expanded.view(start, {length});
        state_backend_->copy(place, state_[i].view(compact_offset(start), {length}));
      }
      out.emplace_back(state_names_[i], expanded);
    } else {
      out.emplace_back(state_names_[i], state_[i]);
    }
  }
  return out;
}

nlohmann::json Optimizer::hyper_json() const {
  nlohmann::json hyper = {{"lr", hyper_.lr},         {"beta1", hyper_.beta1},
                          {"beta2", hyper_.beta2},   {"eps", hyper_.eps},
                          {"weight_decay", hyper_.weight_decay},
                          {"bias_correction", hyper_.bias_correction},
                          {"adam_w_mode", hyper_.adam_w_mode}};
  if (muon_) {
    hyper["muon_lr"] = muon_lr_;
    hyper["adam_lr"] = adam_lr_;
    hyper["momentum"] = muon_hyper_.momentum;
    hyper["nesterov"] = muon_hyper_.nesterov;
    hyper["ns_steps"] = muon_hyper_.ns_steps;
  }
  return hyper;
}

}  // namespace zero::optim
