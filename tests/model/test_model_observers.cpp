// Several UnitObservers on one model: the sharding slot (set_observer) stays outermost and the
// added observers nest inside it in order, so a profiler added later brackets only the unit's
// own work; remove_observer takes one out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

class Recorder final : public UnitObserver {
 public:
  Recorder(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  void before_forward(size_t u) override { note("bf", u); }
  void after_forward(size_t u) override { note("af", u); }
  void before_backward(size_t u) override { note("bb", u); }
  void after_backward(size_t u) override { note("ab", u); }

 private:
  void note(const char* what, size_t u) { log_.push_back(name_ + "." + what + std::to_string(u)); }
  std::string name_;
  std::vector<std::string>& log_;
};

Batch tiny_batch(int64_t vocab) {
  Tensor ids = Tensor::zeros_host({1, 4}, DType::kI64);
  for (int64_t i = 0; i < 4; ++i) ids.data<int64_t>()[i] = (3 * i + 1) % vocab;
  return batch_from_input_ids(ids);
}

TEST(ModelObservers, AddedObserversNestInsideTheShardingObserver) {
  backend::CpuBackend cpu;
  TransformerConfig c = preset_config("tiny");
  c.num_layers = 1;
  auto model = build_transformer(c, cpu, DType::kF32);
  std::vector<std::string> log;
  Recorder sharding("s", log), first("p", log), second("q", log);
  model->set_observer(&sharding);
  model->add_observer(&first);
  model->add_observer(&second);
  model->forward_backward(tiny_batch(c.vocab_size));
  const size_t units = model->units().size();
  ASSERT_EQ(log.size(), units * 12);
  const std::vector<std::string> unit0_forward = {"s.bf0", "p.bf0", "q.bf0",
                                                  "q.af0", "p.af0", "s.af0"};
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + 6), unit0_forward);
  const std::vector<std::string> unit0_backward = {"s.bb0", "p.bb0", "q.bb0",
                                                   "q.ab0", "p.ab0", "s.ab0"};
  EXPECT_EQ(std::vector<std::string>(log.end() - 6, log.end()), unit0_backward);

  log.clear();
  model->remove_observer(&first);
  model->forward_backward(tiny_batch(c.vocab_size));
  ASSERT_EQ(log.size(), units * 8);
  EXPECT_EQ(log[0], "s.bf0");
  EXPECT_EQ(log[1], "q.bf0");
  for (const std::string& event : log) EXPECT_NE(event[0], 'p') << event;

  // Without the sharding observer the added ones still run.
  log.clear();
  model->set_observer(nullptr);
  model->evaluate(tiny_batch(c.vocab_size));
  ASSERT_EQ(log.size(), units * 2);
  EXPECT_EQ(log[0], "q.bf0");
  model->remove_observer(&second);
}

}  // namespace
}  // namespace zero::model
