#include "tools/estimate_table.h"

#include <cstdio>
#include <string>
#include <vector>

#include "tools/estimate_format.h"

namespace zero::tools {
namespace {

using sharding::offload_device_name;

std::string plural_s(int64_t count) { return count > 1 ? "s" : ""; }

void print_activations(const EstimateRequest& req, const EstimateResult& result) {
  const sharding::ActivationSettings& s = req.settings;
  const sharding::ActivationMemory& a = *req.activations;
  std::printf("Activations per GPU: micro-batch %lld x %lld tokens, checkpointing %s%s, %s "
              "attention, tiled MLP %lld shard(s), tiled logits %lld shard(s), sequence parallel "
              "%lld: %s per block, %s for %lld blocks, %s logits; peak %s",
              static_cast<long long>(s.micro_batch), static_cast<long long>(s.seq_len),
              s.checkpointing ? "on" : "off", s.cpu_checkpointing ? " (inputs on the host)" : "",
              req.attention.c_str(), static_cast<long long>(a.mlp_shards),
              static_cast<long long>(a.logits_shards),
              static_cast<long long>(s.sequence_parallel), gib(a.per_layer_bytes).c_str(),
              gib(a.layers_bytes).c_str(), static_cast<long long>(req.mesh.stage->num_layers),
              gib(a.logits_bytes).c_str(), gib(a.total_bytes()).c_str());
  if (req.mesh.in_flight > 1) {
    std::printf(" per micro-batch, x %lld in flight (1F1B) = %s",
                static_cast<long long>(req.mesh.in_flight), gib(result.activation_bytes).c_str());
  }
  if (a.host_bytes > 0) std::printf(" + %s in host memory", gib(a.host_bytes).c_str());
  std::printf("\n");
}

void print_header(const EstimateRequest& req, const EstimateResult& result) {
  const sharding::EstimateShape& shape = req.shape;
  const int64_t gpus = shape.total_gpus();
  std::printf("Memory for params, gradients and optimizer states (DeepSpeed's estimators, "
              "additional_buffer_factor %.2g)\n", shape.additional_buffer_factor);
  std::printf("HW: %lld node%s x %lld GPU%s = %lld GPU%s\n",
              static_cast<long long>(shape.num_nodes), plural_s(shape.num_nodes).c_str(),
              static_cast<long long>(shape.gpus_per_node), plural_s(shape.gpus_per_node).c_str(),
              static_cast<long long>(gpus), plural_s(gpus).c_str());
  if (req.mesh.shown) {
    std::printf("%s\n",
                describe_mesh(req.mesh, req.config ? req.config->num_layers : 0).c_str());
  }
  std::printf("SW: %s%lldM total params, %lldM largest layer params\n",
              req.config ? ("model " + req.model_name + ", ").c_str() : "",
              static_cast<long long>(shape.total_params / 1000000),
              static_cast<long long>(shape.largest_layer_params / 1000000));
  if (req.mesh.drops_stages) {
    std::printf("(ZeRO stages 2 and 3 are left out: DeepSpeed refuses them with a pipeline, and "
                "so does zero train)\n");
  }
  if (req.activations) print_activations(req, result);
  std::printf("\n");
}

void print_rows(const EstimateRequest& req, const EstimateResult& result) {
  std::string header = "stage  offload_optimizer  offload_param  zero_init   GPU states";
  if (req.activations) header += "    GPU total";
  header += "      CPU/node     NVMe/node";
  if (req.gpu_budget_bytes) header += "  fits";
  std::printf("%s\n", header.c_str());
  for (const EstimateRow& r : result.rows) {
    const sharding::ZeroOptions& o = r.options;
    std::printf("%5d  %-17s  %-13s  %-9s  %11s", o.stage,
                offload_device_name(o.offload_optimizer), offload_device_name(o.offload_param),
                o.stage == 3 ? (o.zero_init ? "1" : "0") : "-", gib(r.states.gpu_bytes).c_str());
    if (req.activations) std::printf("  %11s", gib(r.gpu_total).c_str());
    std::printf("  %12s  %12s", gib(r.states.cpu_bytes).c_str(),
                r.states.nvme_bytes > 0 ? gib(r.states.nvme_bytes).c_str() : "-");
    if (req.gpu_budget_bytes) std::printf("  %s", row_fits(req, r) ? "yes" : "no");
    std::printf("\n");
  }
  std::printf("\nGPU states: params, gradients and optimizer states per GPU%s. CPU/node: host "
              "memory per node,\nwith the buffer factor. zero_init=1: the model is built "
              "partitioned (deepspeed.zero.Init).\n",
              req.activations ? "; GPU total adds the activations" : "");
  if (req.mesh.model_parallel()) {
    std::printf("With the mesh: per GPU of the largest stage; CPU/node and NVMe/node for the "
                "data-parallel GPUs\nof one stage and tensor-parallel slice on a node, as zero "
                "train's memory preflight counts them.\n");
  }
  bool zero_init_rows = false;
  for (const EstimateRow& r : result.rows) {
    zero_init_rows |= r.options.stage == 3 && r.options.zero_init;
  }
  if (req.mesh.tensor_parallel > 1 && zero_init_rows) {
    // command_train.cpp: zero.Init only without tensor and pipeline parallelism.
    std::printf("zero train builds each tensor-parallel slice whole before partitioning it: its "
                "ZeRO-3 runs are\nthe zero_init=0 rows.\n");
  }
}

void print_longest(const EstimateRequest& req, const EstimateResult& result) {
  const EstimateRow& smallest = result.rows[least_states(result.rows)];
  print_longest_sequences(result.longest, req.gpu_memory_text + " GiB per GPU",
                          describe_zero_options(smallest.options) +
                              " (the listed configuration with the least GPU states, " +
                              gib(smallest.states.gpu_bytes) + ")",
                          result.longest_allowed);
  if (req.mesh.in_flight > 1) {
    std::printf("(%lld micro-batches in flight (1F1B) each hold these activations: the room "
                "after the states is split among them)\n",
                static_cast<long long>(req.mesh.in_flight));
  }
  const model::TransformerConfig& config = *req.config;
  if (config.learned_positions) {
    std::printf("(at most the model's %lld learned positions: a learned position table cannot "
                "extend)\n", static_cast<long long>(config.max_position_embeddings));
  } else if (result.longest.back().longest_seq_len > config.max_position_embeddings) {
    std::printf("(past the model's max_position_embeddings, %lld, zero train needs "
                "--allow-long-sequences true)\n",
                static_cast<long long>(config.max_position_embeddings));
  }
}

// Nothing fits: what is short (host memory, or the GPU) and what would help.
void print_nothing_fits(const EstimateRequest& req, const EstimateResult& result,
                        const std::string& budget) {
  const std::vector<EstimateRow>& rows = result.rows;
  size_t smallest = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].gpu_total < rows[smallest].gpu_total) smallest = i;
  }
  if (rows[smallest].gpu_total <= *req.gpu_budget_bytes) {
    // The GPU side fits somewhere: host memory is what is short.
    int64_t least_host = -1;
    for (const EstimateRow& r : rows) {
      if (r.gpu_total <= *req.gpu_budget_bytes &&
          (least_host < 0 || r.states.cpu_bytes < least_host)) {
        least_host = r.states.cpu_bytes;
      }
    }
    std::printf("nothing fits in %s: the rows that fit the GPU need at least %s of host memory "
                "per node; add nodes or offload to nvme (--offload-optimizer nvme)\n",
                budget.c_str(), gib(least_host).c_str());
  } else {
    std::printf("nothing fits in %s: the smallest is %s at %s per GPU; add GPUs%s or offload "
                "more\n",
                budget.c_str(), describe_zero_options(rows[smallest].options).c_str(),
                gib(rows[smallest].gpu_total).c_str(),
                req.activations ? ", lower --micro-batch or --seq-len" : "");
  }
  if (result.pick_with_checkpointing) {
    std::printf("with --activation-checkpointing, %s would fit\n",
                describe_zero_options(rows[*result.pick_with_checkpointing].options).c_str());
  }
}

// The answer to --gpu-memory (and --cpu-memory): the recommended row or why nothing fits.
void print_verdict(const EstimateRequest& req, const EstimateResult& result) {
  const std::string budget =
      req.gpu_memory_text + " GiB per GPU" +
      (req.cpu_budget_bytes ? " and " + req.cpu_memory_text + " GiB per node" : "");
  if (!req.activations && !req.wants_longest) {
    std::printf("note: activations are not counted; pass --model, --micro-batch and --seq-len "
                "to include them\n");
  }
  if (!result.pick) {
    print_nothing_fits(req, result, budget);
    return;
  }
  const EstimateRow& r = result.rows[*result.pick];
  std::printf("recommended: %s fits in %s (needs %s per GPU, %s host memory per node)\n",
              describe_zero_options(r.options).c_str(), budget.c_str(),
              gib(r.gpu_total).c_str(), gib(r.states.cpu_bytes).c_str());
}

}  // namespace

void print_estimate_table(const EstimateRequest& req, const EstimateResult& result) {
  print_header(req, result);
  print_rows(req, result);
  if (!req.gpu_budget_bytes) return;
  if (req.wants_longest) print_longest(req, result);
  std::printf("\n");
  print_verdict(req, result);
}

}  // namespace zero::tools
