// TrainingData: where `zero train` gets its micro-batches — token shards on disk or the built-in
// synthetic source — behind one interface with a resumable position, so checkpoints restore the
// exact data order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/step_context.h"

namespace zero::engine {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  // The next micro-batch of `micro_batch` sequences of `seq_len` tokens for this rank.
  virtual model::Batch next(int64_t micro_batch, int64_t seq_len) = 0;
  // The position in the data (for checkpoints) and its restoration.
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
  virtual std::string description() const = 0;
  // The known entropy rate of the source in nats per token, when there is one (synthetic data):
  // the loss floor a perfect model reaches.
  virtual std::optional<double> entropy_floor() const { return std::nullopt; }
};

}  // namespace zero::engine
