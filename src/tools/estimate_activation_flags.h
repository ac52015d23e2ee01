// `zero estimate`'s activation flags (--micro-batch, --seq-len, checkpointing, tiling, sequence
// parallelism, dtype, attention) and memory budgets (--gpu-memory, --cpu-memory): they fill
// the request's settings, its activation estimate (on one GPU of the largest pipeline stage)
// and its budgets.
#pragma once
#include "tools/arg_parser.h"
#include "tools/estimate_request.h"

namespace zero::tools {

// `bare_checkpointing` / `bare_cpu_checkpointing`: the flags were given without a value.
// Needs req.config and req.mesh filled (parse_model, parse_mesh). Throws ConfigError naming
// the flag; UnsupportedError for sequence parallelism with a pipeline.
void parse_activation_flags(const ArgParser& parser, bool bare_checkpointing,
                            bool bare_cpu_checkpointing, EstimateRequest& req);

}  // namespace zero::tools
