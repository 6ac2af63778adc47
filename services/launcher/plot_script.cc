#include "services/launcher/plot_script.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace dtrain::launcher {
namespace {

// A gnuplot single-quoted string: no escapes, '' stands for '.
std::string Quoted(const std::string& s) { return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'"); }

}  // namespace

std::string PlotData(const std::vector<metrics::EpochFigures>& rows) {
  std::string out;
  for (const auto& r : rows) {
    absl::StrAppendFormat(&out, "%d,%.6f,%.6f,%.6f,%.2f\n", r.epoch, r.train_loss, r.train_accuracy,
                          r.validation_accuracy, r.samples_per_sec);
  }
  return out;
}

std::string PlotScript(const PlotSpec& spec, const std::vector<metrics::EpochFigures>& rows) {
  // One epoch is one point: widen the axis so gnuplot neither warns nor squashes it.
  const double lo = static_cast<double>(rows.front().epoch) - (rows.size() == 1 ? 0.5 : 0.0);
  const double hi = static_cast<double>(rows.back().epoch) + (rows.size() == 1 ? 0.5 : 0.0);
  const std::string data = Quoted(spec.data_path);
  std::string s;
  absl::StrAppendFormat(&s, "set terminal %s size %d,%d%s\n", spec.terminal, spec.width, spec.height,
                        spec.format == ImageFormat::kSvg ? " fixed background rgb 'white'" : "");
  absl::StrAppend(&s, "set output ", Quoted(spec.output_path), "\n");
  absl::StrAppend(&s,
                  "set datafile separator ','\n"
                  "set grid\n"
                  "set key outside right top\n"
                  "set xlabel 'epoch'\n",
                  absl::StrFormat("set xrange [%g:%g]\n", lo, hi), hi - lo <= 20 ? "set xtics 1\n" : "",
                  "set offsets 0, 0, graph 0.05, graph 0.05\n"
                  "set style data linespoints\n"
                  // Fixed margins line the three panels' epoch axes up.
                  "set lmargin 12\n"
                  "set rmargin 18\n");
  absl::StrAppend(&s, "set multiplot layout 3,1 title ", Quoted(spec.title), "\n");
  absl::StrAppend(&s, "set ylabel 'cross-entropy'\n", "plot ", data,
                  " using 1:2 title 'training loss' lw 2 pt 7 lc rgb '#d62728'\n");
  absl::StrAppend(&s, "set ylabel 'accuracy'\n", "plot ", data,
                  " using 1:3 title 'training' lw 2 pt 7 lc rgb '#1f77b4', ", data,
                  " using 1:4 title 'validation' lw 2 pt 5 lc rgb '#2ca02c'\n");
  absl::StrAppend(&s, "set ylabel 'samples/s'\n", "plot ", data,
                  " using 1:5 title 'worker 0' lw 2 pt 7 lc rgb '#9467bd'\n");
  absl::StrAppend(&s, "unset multiplot\n", "set output\n");
  return s;
}

}  // namespace dtrain::launcher
