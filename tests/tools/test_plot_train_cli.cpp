// `zero plot` on what `zero train --log-json` really writes: two tiny-llama runs that differ
// only in --lr (the config's "auto" lr), plotted to PNG and SVG. Guards the contract between
// the trainer's log keys and the plot reader.
#include <gtest/gtest.h>

#include <string>

#include "tools/plot_png_decoder.h"
#include "tools/plot_svg_reader.h"
#include "tools/plot_test_dir.h"

namespace zero::testing {
namespace {

constexpr int kSteps = 6;

class PlotTrainCli : public PlotTestDir {
 protected:
  // A line per step (steps_per_print 1) and a warmup, so the lr panel has a shape.
  std::string config() const {
    return write("ds_config.json", R"({
      "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": "auto",
                                                   "warmup_num_steps": 3}}})");
  }

  std::string train(const std::string& name, const std::string& lr) const {
    const std::string log = path(name);
    const CliResult result = zero("train --model tiny-llama --steps " + std::to_string(kSteps) +
                                  " --seq-len 16 --deepspeed " + quoted(config()) + " --lr " + lr +
                                  " --log-json " + quoted(log));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return log;
  }
};

TEST_F(PlotTrainCli, TwoTrainingRunsOverlaid) {
  const std::string a = train("A.jsonl", "1e-3");
  const std::string b = train("B.jsonl", "1e-2");

  CliResult result = zero("plot " + quoted(a) + " " + quoted(b) + " -o " + quoted(path("out.svg")));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string svg = read(path("out.svg"));
  // bf16/fp32 runs log a loss scale of 1: loss and learning-rate panels only.
  EXPECT_EQ(svg_frames(svg).size(), 2u);
  for (const std::string run : {"run0", "run1"}) {
    for (const std::string key : {"loss", "lr"}) {
      const auto lines = svg_polylines(svg, "series " + key + " " + run);
      ASSERT_EQ(lines.size(), 1u) << key << " " << run;
      EXPECT_EQ(lines[0].size(), static_cast<size_t>(kSteps)) << key << " " << run;
    }
  }
  // The larger lr peaks higher: its curve reaches further up the lr panel (smaller SVG y).
  const auto lr_a = svg_polylines(svg, "series lr run0")[0];
  const auto lr_b = svg_polylines(svg, "series lr run1")[0];
  EXPECT_LT(lr_b.back().second, lr_a.back().second);
  EXPECT_TRUE(contains(svg, "A.jsonl - last loss "));
  EXPECT_TRUE(contains(svg, "B.jsonl - last loss "));

  result = zero("plot " + quoted(a) + " " + quoted(b) + " -o " + quoted(path("out.png")));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::string why;
  const std::optional<DecodedPng> png = decode_png(read(path("out.png")), why);
  ASSERT_TRUE(png.has_value()) << why;
  EXPECT_EQ(png->width, 1920);
  int blue = 0, orange = 0;
  for (size_t i = 0; i + 2 < png->rgb.size(); i += 3) {
    blue += png->rgb[i] == 0 && png->rgb[i + 1] == 114 && png->rgb[i + 2] == 178;
    orange += png->rgb[i] == 213 && png->rgb[i + 1] == 94 && png->rgb[i + 2] == 0;
  }
  EXPECT_GT(blue, 200);
  EXPECT_GT(orange, 200);
}

}  // namespace
}  // namespace zero::testing
