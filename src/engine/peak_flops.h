// The FLOP/s that MFU divides by. GPUs will report their datasheet peak; on the CPU there is no
// reliable datasheet number, so the peak is measured: the best of a few f32 matrix products on
// this backend (about 0.2 s). MFU on the CPU therefore means "fraction of this machine's matmul
// rate".
#pragma once
#include "backend/backend.h"

namespace zero::engine {

double measure_matmul_peak_flops(backend::Backend& backend);

}  // namespace zero::engine
