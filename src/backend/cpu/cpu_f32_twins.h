// F32Twins: how the CPU backend runs a kernel on 16-bit (bf16/f16) tensors. Each 16-bit argument
// gets an f32 twin - same shape, strides and offset over an f32 copy of its whole storage - the
// f32 kernel runs on the twins, and finish() rounds the outputs back to nearest-even. That is a
// GPU kernel's numerics: it reads 16-bit values, computes in f32 and rounds once when it stores.
//
// Arguments that share a storage (q, k and v views of one fused buffer, in-place operands) share
// one twin, so in-place kernels stay in place. Writing a whole storage back is exact for the
// elements a kernel did not touch (16 -> 32 -> 16 bits round-trips). f32 and f64 arguments are
// passed through untouched. One F32Twins serves one kernel call on one thread. The twins are
// transient MemoryCategory::kWorkspace allocations: the emulation's cost, visible in peak memory
// on the CPU; a GPU kernel needs none.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace zero::backend::cpu {

// Whether `t` is defined and stored in bf16 or f16.
bool is_16bit(const Tensor* t);
bool is_16bit(const Tensor& t);

class F32Twins {
 public:
  F32Twins() = default;
  F32Twins(const F32Twins&) = delete;
  F32Twins& operator=(const F32Twins&) = delete;

  // An input: the f32 twin of a 16-bit tensor, else `t` itself. nullptr stays nullptr.
  const Tensor& in(const Tensor& t);
  const Tensor* in(const Tensor* t);
  // An output (overwritten or accumulated into): the twin, rounded back by finish().
  Tensor& out(Tensor& t);
  Tensor* out(Tensor* t);
  // Rounds every output's storage back to its 16-bit dtype.
  void finish();

 private:
  struct Twin {
    std::shared_ptr<Storage> original;
    DType dtype;
    int64_t elements;
    Tensor wide;  // f32 [elements], a copy of the whole original storage
    bool written = false;
  };
  Twin& twin_of(const Tensor& t);
  Tensor& keep(Tensor view);

  std::map<const Storage*, Twin> twins_;
  std::vector<std::unique_ptr<Tensor>> views_;  // stable addresses for the returned references
};

}  // namespace zero::backend::cpu
