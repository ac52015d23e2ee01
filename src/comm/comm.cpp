#include "comm/comm.h"

namespace zero::comm {

double Comm::all_reduce_scalar(double value, ReduceOp op) {
  Tensor t = Tensor::zeros_host({1}, DType::kF64, MemoryCategory::kComm);
  t.data<double>()[0] = value;
  all_reduce(t, op);
  return t.data<double>()[0];
}

}  // namespace zero::comm
