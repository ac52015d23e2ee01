// `zero estimate --json`: the request's sizes and the result's exact bytes as one JSON object
// (total_params, largest_layer_params, gpus_per_node, nodes, additional_buffer_factor, mesh when
// a mesh flag was given, activations, longest_sequence, rows with fits, recommended).
#pragma once
#include <nlohmann/json.hpp>

#include "tools/estimate_request.h"
#include "tools/estimate_rows.h"

namespace zero::tools {

nlohmann::json estimate_json(const EstimateRequest& request, const EstimateResult& result);

}  // namespace zero::tools
