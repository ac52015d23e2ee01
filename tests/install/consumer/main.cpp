// Builds and trains nothing: one forward/backward through the installed library proves it links.
#include "backend/cpu/cpu_backend.h"
#include "model/transformer_builder.h"
#include <cstdio>
#include <random>
int main() {
  zero::backend::CpuBackend cpu;
  auto m = zero::model::build_transformer(zero::model::preset_config("tiny-llama"), cpu, zero::DType::kF32);
  zero::model::init_parameters(*m, 1);
  zero::Tensor ids = zero::Tensor::zeros_host({2, 8}, zero::DType::kI64);
  for (int i = 0; i < 16; ++i) ids.data<int64_t>()[i] = i * 7 % 256;
  std::printf("loss %.4f\n", m->forward_backward(zero::model::batch_from_input_ids(ids)));
}
