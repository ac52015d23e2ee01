// `zero plot` output, read back: the SVG holds one polyline per run and panel with every
// logged point, inside that panel, and the legend names each log file; the PNG is a valid
// image (signature, chunk CRCs, IHDR, inflated rows) the size of the SVG at twice the scale,
// with each run's colour inside every panel. Logs are written by hand so every count is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "tools/plot_png_decoder.h"
#include "tools/plot_svg_reader.h"
#include "tools/plot_test_dir.h"

namespace zero::testing {
namespace {

class PlotOutput : public PlotTestDir {
 protected:
  // alpha: steps 1..10, loss falling from 4.7 to 2, lr warming up, loss scale 1 (no fp16), and
  // eval lines at steps 5 and 10. beta: steps 2..20 by 2, fp16-style loss scale.
  void write_two_runs() {
    std::string alpha, beta;
    char line[256];
    for (int i = 1; i <= 10; ++i) {
      std::snprintf(line, sizeof line,
                    "{\"step\":%d,\"loss\":%g,\"lr\":%g,\"loss_scale\":1.0,\"skipped_steps\":0}\n",
                    i, 5.0 - 0.3 * i, 1e-3 * i / 10);
      alpha += line;
      if (i % 5 == 0) {
        std::snprintf(line, sizeof line, "{\"step\":%d,\"eval_loss\":%g}\n", i, 5.2 - 0.3 * i);
        alpha += line;
      }
      std::snprintf(line, sizeof line, "{\"step\":%d,\"loss\":%g,\"lr\":3e-4,\"loss_scale\":%g}\n",
                    2 * i, 4.0 - 0.1 * i, i % 3 == 0 ? 32768.0 : 65536.0);
      beta += line;
    }
    alpha_ = write("alpha.jsonl", alpha);
    beta_ = write("beta.jsonl", beta);
  }

  std::string plot(const std::string& extra) {
    const CliResult result = zero("plot " + quoted(alpha_) + " " + quoted(beta_) + " " + extra);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
  }

  std::string alpha_, beta_;
};

TEST_F(PlotOutput, SvgHasOnePolylinePerRunAndPanelWithEveryPoint) {
  write_two_runs();
  plot("-o " + quoted(path("curves.svg")));
  const std::string svg = read(path("curves.svg"));
  ASSERT_TRUE(contains(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"")) << svg.substr(0, 300);
  ASSERT_TRUE(contains(svg, "</svg>"));

  // Loss, learning rate, and loss scale (beta's scale is not 1): three panels, top to bottom.
  const std::vector<SvgBox> frames = svg_frames(svg);
  ASSERT_EQ(frames.size(), 3u);
  const char* panel_of_key[] = {"loss", "lr", "loss_scale"};
  for (int run = 0; run < 2; ++run) {
    for (int panel = 0; panel < 3; ++panel) {
      const std::string cls =
          std::string("series ") + panel_of_key[panel] + " run" + std::to_string(run);
      const auto lines = svg_polylines(svg, cls);
      ASSERT_EQ(lines.size(), 1u) << cls;
      ASSERT_EQ(lines[0].size(), 10u) << cls;
      double previous_x = -1;
      for (const auto& [x, y] : lines[0]) {
        EXPECT_GT(x, previous_x) << cls << ": steps go left to right";
        previous_x = x;
        EXPECT_TRUE(x >= frames[panel].left && x <= frames[panel].right && y >= frames[panel].top &&
                    y <= frames[panel].bottom)
            << cls << " point (" << x << ", " << y << ") is outside its panel";
      }
    }
  }
  // The loss falls, so its curve goes down the picture (SVG y grows downwards).
  const auto loss = svg_polylines(svg, "series loss run0")[0];
  EXPECT_LT(loss.front().second, loss.back().second);
  // alpha's two eval points: one dashed line and a dot on each; beta logged none.
  const auto eval = svg_polylines(svg, "series eval_loss run0");
  ASSERT_EQ(eval.size(), 1u);
  EXPECT_EQ(eval[0].size(), 2u);
  EXPECT_TRUE(contains(svg, "stroke-dasharray"));
  EXPECT_EQ(svg_count(svg, "class=\"marker eval_loss run0\""), 2u);
  EXPECT_TRUE(svg_polylines(svg, "series eval_loss run1").empty());

  // The legend names each file with its last values; the title names the files too.
  EXPECT_TRUE(contains(svg, "alpha.jsonl - last loss 2 (step 10), eval 2.2 (step 10)</text>"))
      << svg;
  EXPECT_TRUE(contains(svg, "beta.jsonl - last loss 3 (step 20)</text>"));
  EXPECT_TRUE(contains(svg, ">Training curves: alpha.jsonl, beta.jsonl</text>"));
  EXPECT_TRUE(contains(svg, ">loss scale (log2 axis)</text>"));
  EXPECT_TRUE(contains(svg, ">65536</text>"));
  EXPECT_TRUE(contains(svg, ">step</text>"));
}

TEST_F(PlotOutput, PngDecodesAndEveryPanelShowsEveryRun) {
  write_two_runs();
  plot("-o " + quoted(path("curves.svg")));
  const std::string output = plot("-o " + quoted(path("curves.png")));
  EXPECT_TRUE(contains(output, "wrote " + path("curves.png"))) << output;

  std::string why;
  const std::optional<DecodedPng> png = decode_png(read(path("curves.png")), why);
  ASSERT_TRUE(png.has_value()) << why;
  // The PNG is the SVG's layout at two pixels per unit.
  const std::string svg = read(path("curves.svg"));
  EXPECT_EQ(png->width, 2 * std::stoi(svg_attribute(svg, svg.find("<svg"), "width")));
  EXPECT_EQ(png->height, 2 * std::stoi(svg_attribute(svg, svg.find("<svg"), "height")));

  const uint8_t run_colors[2][3] = {{0, 114, 178}, {213, 94, 0}};
  const std::vector<SvgBox> frames = svg_frames(svg);
  ASSERT_EQ(frames.size(), 3u);
  for (size_t panel = 0; panel < frames.size(); ++panel) {
    int run_pixels[2] = {0, 0};
    int background = 0, total = 0;
    for (int y = static_cast<int>(2 * frames[panel].top) + 2;
         y < static_cast<int>(2 * frames[panel].bottom) - 1; ++y) {
      for (int x = static_cast<int>(2 * frames[panel].left) + 2;
           x < static_cast<int>(2 * frames[panel].right) - 1; ++x) {
        const uint8_t* pixel = png->at(x, y);
        ++total;
        if (pixel[0] == 255 && pixel[1] == 255 && pixel[2] == 255) ++background;
        for (int run = 0; run < 2; ++run) {
          if (std::equal(pixel, pixel + 3, run_colors[run])) ++run_pixels[run];
        }
      }
    }
    for (int run = 0; run < 2; ++run) {
      EXPECT_GT(run_pixels[run], 50) << "panel " << panel << " shows no curve of run " << run;
    }
    // A chart, not a flood: most of the panel is still background.
    EXPECT_GT(background, total / 2) << "panel " << panel;
  }
  // The title is drawn in dark ink at the top.
  int ink = 0;
  for (int y = 0; y < 100; ++y) {
    for (int x = 0; x < png->width; ++x) ink += png->at(x, y)[0] < 60 ? 1 : 0;
  }
  EXPECT_GT(ink, 500);
}

TEST_F(PlotOutput, NonFiniteLossesAreGapsAndCounted) {
  // Python's json module writes NaN and Infinity bare; nlohmann writes null.
  alpha_ = write(
      "alpha.jsonl",
      "{\"step\":1,\"loss\":5}\n{\"step\":2,\"loss\":4.5}\n{\"step\":3,\"loss\":4}\n"
      "{\"step\":4,\"loss\":NaN}\n{\"step\":5,\"loss\":Infinity}\n{\"step\":6,\"loss\":null}\n"
      "{\"step\":7,\"loss\":3.5,\"note\":\"NaN in a string stays\"}\n{\"step\":8,\"loss\":3}\n"
      "{\"step\":9,\"loss\":-Infinity}\n{\"step\":10,\"loss\":2.5}\n");
  beta_ = write("beta.jsonl", "{\"step\":1,\"loss\":5}\n{\"step\":10,\"loss\":1}\n");
  const std::string output = plot("-o " + quoted(path("gaps.svg")));
  EXPECT_TRUE(contains(output, "alpha.jsonl: 4 non-finite loss value(s)")) << output;
  const std::string svg = read(path("gaps.svg"));
  // Steps 1-3 and 7-8 are lines; step 10 stands alone between a gap and the end: a dot.
  const auto lines = svg_polylines(svg, "series loss run0");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), 3u);
  EXPECT_EQ(lines[1].size(), 2u);
  EXPECT_EQ(svg_count(svg, "<circle class=\"series loss run0\""), 1u);
  EXPECT_TRUE(contains(svg, ">note: ")) << "the note is in the picture too";
}

TEST_F(PlotOutput, ResumedRunReplacesTheStepsItRepeatsAndSaysSo) {
  // Steps 1-6, then a run resumed from step 3 appended 4-8 to the same file.
  std::string text;
  for (int step : {1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8}) {
    text += "{\"step\":" + std::to_string(step) + ",\"loss\":" + std::to_string(10 - step) + "}\n";
  }
  alpha_ = write("alpha.jsonl", text);
  beta_ = write("beta.jsonl", "{\"step\":1,\"loss\":5}\n");
  const std::string output = plot("-o " + quoted(path("resumed.svg")));
  EXPECT_TRUE(contains(output, "the steps go back 1 time (first at line 7, step 4)")) << output;
  const auto lines = svg_polylines(read(path("resumed.svg")), "series loss run0");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].size(), 8u);
}

TEST_F(PlotOutput, IncompleteLastLineIsSkippedWithANote) {
  alpha_ =
      write("alpha.jsonl", "{\"step\":1,\"loss\":5}\n{\"step\":2,\"loss\":4}\n{\"step\":3,\"lo");
  beta_ = write("beta.jsonl", "{\"step\":1,\"loss\":5}\n");
  const std::string output = plot("-o " + quoted(path("cut.svg")));
  EXPECT_TRUE(contains(output, "alpha.jsonl:3: the last line is incomplete")) << output;
  EXPECT_EQ(svg_polylines(read(path("cut.svg")), "series loss run0")[0].size(), 2u);
}

TEST_F(PlotOutput, TitleAndFileNamesAreEscapedInTheSvg) {
  write_two_runs();
  const std::string odd = write("a&b<c>.jsonl", read(alpha_));
  const CliResult result = zero("plot " + quoted(odd) + " -o " + quoted(path("odd.svg")) +
                                " --title 'loss & \"friends\"'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string svg = read(path("odd.svg"));
  EXPECT_TRUE(contains(svg, "a&amp;b&lt;c&gt;.jsonl - last loss")) << svg;
  EXPECT_TRUE(contains(svg, ">loss &amp; &quot;friends&quot;</text>"));
  // Only one run: no loss-scale panel, as its loss scale is 1 throughout.
  EXPECT_EQ(svg_frames(svg).size(), 2u);
}

}  // namespace
}  // namespace zero::testing
