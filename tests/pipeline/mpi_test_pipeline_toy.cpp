// mpi-ranks: 2 3 4
// DeepSpeed's schedules run over real MpiComm send/recv: one stage per rank, a toy model of six
// layers y = tanh(w x) (elementwise, one weight each) split by partition_layers, and a squared-
// error loss on the last stage. Each stage keeps its activations in the schedule's pipeline
// buffers, and its backward reads the received input from the buffer, so a schedule that let a
// receive overwrite a live buffer, paired a send with the wrong receive, or dropped a micro-batch
// would change the gradients. They must equal a one-process computation bit for bit (f64): both
// run the same layer functions on the same values (every multiply-add written out, see below),
// and a stage accumulates its micro-batches' gradients in micro-batch order, as the reference
// does.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/world.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/schedule_executor.h"
#include "pipeline/stage_partition.h"

namespace zero::pipeline {
namespace {

constexpr int64_t kWidth = 5;   // elements per activation
constexpr int64_t kLayers = 6;  // toy units
constexpr int kActivationTag = 11;
constexpr int kGradTag = 12;

using Values = std::vector<double>;

// Integer arithmetic, then one division: nothing here that a compiler could fuse into a
// multiply-add in one caller and not in another.
double weight_of(int64_t layer) { return static_cast<double>(5 + layer) / 10.0; }
double input_of(int64_t mb, int64_t i) {
  return std::sin(static_cast<double>(10 + 7 * mb + 3 * i) / 10.0);
}
double target_of(int64_t mb, int64_t i) {
  return std::cos(static_cast<double>(5 + 2 * mb - 4 * i) / 10.0);
}

// Every multiply-add is written as std::fma: with -march=native the compiler may otherwise fuse
// a*b+c in one copy of a loop (vectorised, or peeled for alignment) and not in another, and which
// copy runs depends on the buffers' addresses, so the same values could round differently.
Values layer_forward(double w, const Values& x) {
  Values y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::tanh(w * x[i]);
  return y;
}

// Returns d(loss)/d(x); adds d(loss)/d(w) to `dw`.
Values layer_backward(double w, const Values& x, const Values& y, const Values& dy, double& dw) {
  Values dx(x.size());
  double part = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double local = dy[i] * std::fma(-y[i], y[i], 1.0);  // dy * tanh'
    part = std::fma(local, x[i], part);
    dx[i] = local * w;
  }
  dw += part;
  return dx;
}

// 0.5 * |y - t|^2 added to `loss`; returns d(loss)/d(y).
Values loss_backward(const Values& y, const Values& t, double& loss) {
  Values dy(y.size());
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    dy[i] = y[i] - t[i];
    sum = std::fma(dy[i], dy[i], sum);
  }
  loss = std::fma(0.5, sum, loss);
  return dy;
}

Values micro_batch_values(int64_t mb, double (*value)(int64_t, int64_t)) {
  Values v(kWidth);
  for (int64_t i = 0; i < kWidth; ++i) v[i] = value(mb, i);
  return v;
}

struct Result {
  Values grads = Values(kLayers, 0.0);
  double loss = 0.0;
};

Result one_process(int64_t micro_batches, bool train) {
  Result r;
  for (int64_t mb = 0; mb < micro_batches; ++mb) {
    std::vector<Values> inputs, outputs;
    Values x = micro_batch_values(mb, input_of);
    for (int64_t l = 0; l < kLayers; ++l) {
      inputs.push_back(x);
      x = layer_forward(weight_of(l), x);
      outputs.push_back(x);
    }
    Values dy = loss_backward(x, micro_batch_values(mb, target_of), r.loss);
    if (!train) continue;
    for (int64_t l = kLayers - 1; l >= 0; --l) {
      dy = layer_backward(weight_of(l), inputs[l], outputs[l], dy, r.grads[l]);
    }
  }
  return r;
}

Values values_of(const Tensor& t) { return Values(t.data<double>(), t.data<double>() + kWidth); }
void store(Tensor& t, const Values& v) {
  for (int64_t i = 0; i < kWidth; ++i) t.data<double>()[i] = v[i];
}

// One stage of the toy pipeline: layers [first, last) of the model.
class ToyStage : public StageWorker {
 public:
  // forward_only: evaluation (InferenceSchedule): a buffer is reused once its output is sent.
  ToyStage(comm::Comm& comm, int64_t stage, int64_t stages, int64_t first, int64_t last,
           int64_t buffers, bool forward_only = false)
      : comm_(comm), stage_(stage), stages_(stages), first_(first), last_(last),
        forward_only_(forward_only) {
    for (int64_t b = 0; b < buffers; ++b) buffers_.emplace_back();
  }

  void load_micro_batch(int64_t b, int64_t mb) override {
    Buffer& buf = buffers_.at(b);
    if (stage_ == 0) store(buf.input, micro_batch_values(mb, input_of));
    if (stage_ == stages_ - 1) buf.target = micro_batch_values(mb, target_of);
  }
  void recv_activation(int64_t b, int64_t) override {
    comm_.recv(buffers_.at(b).input, static_cast<int>(stage_ - 1), kActivationTag);
  }
  void forward(int64_t b, int64_t mb) override {
    Buffer& buf = buffers_.at(b);
    if (!forward_only_) {
      EXPECT_EQ(buf.owner, -1) << "stage " << stage_ << " forward of mb " << mb
                               << " into a buffer still holding mb " << buf.owner;
      buf.owner = mb;
    }
    buf.layer_inputs.clear();
    buf.layer_outputs.clear();
    Values x = values_of(buf.input);
    for (int64_t l = first_; l < last_; ++l) {
      buf.layer_inputs.push_back(x);
      x = layer_forward(weight_of(l), x);
      buf.layer_outputs.push_back(x);
    }
    store(buf.output, x);
    if (stage_ == stages_ - 1) {
      ASSERT_EQ(buf.target.size(), static_cast<size_t>(kWidth)) << "labels not loaded";
      store(buf.output_grad, loss_backward(x, buf.target, result.loss));
    }
  }
  void send_activation(int64_t b, int64_t) override {
    comm_.send(buffers_.at(b).output, static_cast<int>(stage_ + 1), kActivationTag);
  }
  void recv_grad(int64_t b, int64_t) override {
    comm_.recv(buffers_.at(b).output_grad, static_cast<int>(stage_ + 1), kGradTag);
  }
  void backward(int64_t b, int64_t mb) override {
    ASSERT_FALSE(forward_only_) << "backward in a forward-only schedule";
    Buffer& buf = buffers_.at(b);
    EXPECT_EQ(buf.owner, mb) << "stage " << stage_;
    Values dy = values_of(buf.output_grad);
    for (int64_t l = last_ - 1; l >= first_; --l) {
      const size_t local = static_cast<size_t>(l - first_);
      // The first layer reads its input from the pipeline buffer, as DeepSpeed's backward does.
      const Values x = l == first_ ? values_of(buf.input) : buf.layer_inputs[local];
      dy = layer_backward(weight_of(l), x, buf.layer_outputs[local], dy, result.grads[l]);
    }
    store(buf.input_grad, dy);
    buf.owner = -1;
  }
  void send_grad(int64_t b, int64_t) override {
    comm_.send(buffers_.at(b).input_grad, static_cast<int>(stage_ - 1), kGradTag);
  }
  void reduce_tied_grads() override { ++reduce_tied_calls; }
  void reduce_grads() override { ++reduce_calls; }
  void optimizer_step() override { ++steps; }

  Result result;
  int reduce_tied_calls = 0, reduce_calls = 0, steps = 0;

 private:
  struct Buffer {
    Tensor input = Tensor::zeros_host({kWidth}, DType::kF64);
    Tensor output = Tensor::zeros_host({kWidth}, DType::kF64);
    Tensor output_grad = Tensor::zeros_host({kWidth}, DType::kF64);
    Tensor input_grad = Tensor::zeros_host({kWidth}, DType::kF64);
    std::vector<Values> layer_inputs, layer_outputs;
    Values target;
    int64_t owner = -1;  // the micro-batch whose activations the buffer holds
  };
  comm::Comm& comm_;
  int64_t stage_, stages_, first_, last_;
  bool forward_only_;
  std::vector<Buffer> buffers_;
};

std::vector<int64_t> toy_parts(int64_t stages) {
  std::vector<LayerInfo> layers;
  for (int64_t l = 0; l < kLayers; ++l) layers.push_back({"layer", "toy", 1});
  return partition_layers(layers, stages, PartitionMethod::parse("uniform"));
}

void expect_sends(const comm::Comm& comm, int64_t sends, int64_t receives) {
  const comm::OpStats& send = comm.stats().at(comm::OpKind::kSend);
  const comm::OpStats& recv = comm.stats().at(comm::OpKind::kRecv);
  EXPECT_EQ(send.calls, sends);
  EXPECT_EQ(recv.calls, receives);
  EXPECT_EQ(send.message_bytes, sends * kWidth * 8);  // one f64 activation per message
}

TEST(PipelineToy, TrainScheduleGivesOneProcessGradients) {
  comm::Comm& world = comm::world();
  const int64_t p = world.world_size(), s = world.rank();
  const std::vector<int64_t> parts = toy_parts(p);
  for (const int64_t m : {1, 2, 5}) {
    const TrainSchedule schedule(m, p, s);
    ToyStage stage(world, s, p, parts[s], parts[s + 1], schedule.num_pipe_buffers());
    world.barrier();
    world.reset_stats();
    execute_schedule(schedule.steps(), stage);
    // Stage s sends m activations forward (unless last) and m gradients back (unless first),
    // and receives as many.
    const int64_t messages = m * ((s + 1 < p ? 1 : 0) + (s > 0 ? 1 : 0));
    expect_sends(world, messages, messages);
    const Result expected = one_process(m, true);
    for (int64_t l = parts[s]; l < parts[s + 1]; ++l) {
      EXPECT_EQ(stage.result.grads[l], expected.grads[l]) << "m=" << m << " layer " << l;
    }
    if (s == p - 1) {
      EXPECT_EQ(stage.result.loss, expected.loss) << "m=" << m;
    }
    EXPECT_EQ(stage.reduce_tied_calls, 1);
    EXPECT_EQ(stage.reduce_calls, 1);
    EXPECT_EQ(stage.steps, 1);
  }
}

TEST(PipelineToy, InferenceScheduleGivesOneProcessLoss) {
  comm::Comm& world = comm::world();
  const int64_t p = world.world_size(), s = world.rank();
  const std::vector<int64_t> parts = toy_parts(p);
  for (const int64_t m : {1, 4}) {
    const InferenceSchedule schedule(m, p, s);
    ToyStage stage(world, s, p, parts[s], parts[s + 1], schedule.num_pipe_buffers(),
                   /*forward_only=*/true);
    world.barrier();
    world.reset_stats();
    execute_schedule(schedule.steps(), stage);
    // Activations only: m sends unless last, m receives unless first.
    expect_sends(world, s + 1 < p ? m : 0, s > 0 ? m : 0);
    if (s == p - 1) {
      EXPECT_EQ(stage.result.loss, one_process(m, false).loss) << "m=" << m;
    }
    EXPECT_EQ(stage.steps, 0);
  }
}

}  // namespace
}  // namespace zero::pipeline
