// `zero estimate`'s table on stdout: the hardware, mesh and model, the activations of the
// micro-batch, one line per ZeRO row (GPU states, GPU total, CPU and NVMe per node, fits), the
// longest sequences that fit, and the verdict for --gpu-memory (the recommended row, or why
// nothing fits and what would).
#pragma once
#include "tools/estimate_request.h"
#include "tools/estimate_rows.h"

namespace zero::tools {

void print_estimate_table(const EstimateRequest& request, const EstimateResult& result);

}  // namespace zero::tools
