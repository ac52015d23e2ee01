// `zero estimate`: memory per GPU and per node for ZeRO stages 0-3 with and without offload
// (sharding::estimate_model_states, DeepSpeed's estimators), optionally with the activations of
// a micro-batch, on a pipeline x tensor-parallel x data-parallel mesh, and with --gpu-memory the
// fastest configuration that fits. The arithmetic is in sharding/; the flags become a request
// (estimate_request), the request a result (estimate_rows), the result a table (estimate_table)
// or JSON (estimate_json).
#include <cstdio>
#include <optional>

#include "tools/command.h"
#include "tools/estimate_json.h"
#include "tools/estimate_request.h"
#include "tools/estimate_rows.h"
#include "tools/estimate_table.h"

namespace zero::tools {

int run_estimate(const Args& args) {
  const std::optional<EstimateRequest> request = parse_estimate_request(args);
  if (!request) return 0;  // --help
  const EstimateResult result = compute_estimate(*request);
  if (request->json) {
    std::printf("%s\n", estimate_json(*request, result).dump(2).c_str());
  } else {
    print_estimate_table(*request, result);
  }
  return 0;
}

}  // namespace zero::tools
