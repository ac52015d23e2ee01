// `zero plot LOG.jsonl [LOG.jsonl ...] -o curve.png|curve.svg [--title TEXT]`: the loss (and
// eval loss, learning rate, loss scale) of one or more `zero train --log-json` runs against
// step, overlaid, as a picture a person can look at.
#include "tools/command.h"

#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "io/atomic_file.h"
#include "tools/arg_parser.h"
#include "tools/plot/chart.h"
#include "tools/plot/png_writer.h"
#include "tools/plot/raster_canvas.h"
#include "tools/plot/run_log.h"
#include "tools/plot/svg_canvas.h"

namespace zero::tools {
namespace {

// The PNG has twice the SVG's units in pixels: sharp on high-density screens, still small.
constexpr double kPngPixelRatio = 2.0;
constexpr const char* kSupported = ".png or .svg";

std::string lowercase_extension(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string extension = path.substr(dot);
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

void write_output(const std::string& path, const std::string& bytes) {
  io::write_file_atomically(path, [&](std::FILE* file) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
      throw FileError(path + ": writing the plot failed; check the disk space and permissions");
    }
  });
}

}  // namespace

int run_plot(const Args& args) {
  // Log files are positional; -o is the one short flag, turned into --output for the parser.
  std::vector<std::string> logs, flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool takes_value =
        (arg == "-o" || arg.rfind("--", 0) == 0) && arg.find('=') == std::string::npos;
    if (arg == "-o" || arg.rfind("--", 0) == 0 || ArgParser::is_help(arg)) {
      flags.push_back(arg == "-o" ? "--output" : arg);
      if (takes_value && !ArgParser::is_help(arg) && i + 1 < args.size())
        flags.push_back(args[++i]);
    } else {
      logs.push_back(arg);
    }
  }
  ArgParser parser("plot", flags);
  parser.synopsis("zero plot LOG.jsonl [LOG.jsonl ...] -o FILE.png|FILE.svg [--title TEXT]",
                  "  Each LOG is a `zero train --log-json` file; the runs are overlaid, one colour "
                  "each.\n  Panels: loss (with eval_loss when logged), learning rate, loss scale "
                  "(when it is not 1).\n");
  parser.option("output", "", "the picture to write (-o): FILE.png or FILE.svg")
      .option("title", "", "the title (default: \"Training curves: \" and the log files)");
  if (!parser.parse()) return 0;
  if (logs.empty()) {
    throw ConfigError("zero plot needs at least one log file (a `zero train --log-json` file)\n" +
                      parser.usage());
  }
  const std::string output = parser.get("output");
  if (output.empty()) {
    throw ConfigError("zero plot needs -o FILE.png or -o FILE.svg to say where the picture goes");
  }
  const std::string extension = lowercase_extension(output);
  if (extension != ".png" && extension != ".svg") {
    throw ConfigError("zero plot: -o " + ArgParser::shown(output) + ": cannot write a \"" +
                      ArgParser::shown(extension) + "\" picture; the output must end in " +
                      kSupported);
  }

  std::vector<plot::RunLog> runs;
  for (const std::string& path : logs) runs.push_back(plot::read_run_log(path));
  for (const plot::RunLog& run : runs) {
    for (const std::string& note : run.notes)
      std::fprintf(stderr, "zero plot: note: %s\n", note.c_str());
  }

  const plot::Chart chart(runs, parser.get("title"));
  if (extension == ".svg") {
    plot::SvgCanvas canvas(chart.width(), chart.height());
    chart.draw(canvas);
    write_output(output, canvas.document());
    std::printf("wrote %s (%d runs, %.0f x %.0f)\n", output.c_str(), static_cast<int>(runs.size()),
                chart.width(), chart.height());
  } else {
    plot::RasterCanvas canvas(chart.width(), chart.height(), kPngPixelRatio, {255, 255, 255});
    chart.draw(canvas);
    write_output(output,
                 plot::encode_png(canvas.pixel_width(), canvas.pixel_height(), canvas.rgb()));
    std::printf("wrote %s (%d runs, %d x %d pixels)\n", output.c_str(),
                static_cast<int>(runs.size()), canvas.pixel_width(), canvas.pixel_height());
  }
  return 0;
}

}  // namespace zero::tools
