// `dtrain plot PREFIX`: PREFIX-metrics.csv (one row per epoch, written by worker 0)
// as a picture: loss and accuracy against epoch, and samples/s, drawn by gnuplot
// (Debian's gnuplot-nox), as PNG or SVG.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/metrics/metrics_csv.h"
#include "services/launcher/commands.h"
#include "services/launcher/plot_script.h"

namespace dtrain::launcher {
namespace {

struct PlotFlags {
  std::string prefix;
  std::string output;  // default PREFIX-metrics.png (or .svg with --format svg)
  std::string format;  // png or svg; default: from --output's extension, else png
  std::string size = "1200x900";
  std::string gnuplot = "gnuplot";
  double timeout_s = 30;
};

absl::Status ParsePlotFlags(const std::vector<std::string>& args, PlotFlags* f, PlotSpec* spec, bool* help) {
  FlagSet flags("dtrain plot",
                "Draws PREFIX-metrics.csv (written per epoch by worker 0 with --model-prefix PREFIX):\n"
                "training loss, training and validation accuracy, and samples/s against epoch.\n"
                "Usage: dtrain plot PREFIX [--output FILE.png|FILE.svg]");
  flags.AddString("output", &f->output, "the image to write (default PREFIX-metrics.png)");
  flags.AddString("format", &f->format, "png or svg (default: from --output's extension, else png)");
  flags.AddString("size", &f->size, "image size in pixels, WIDTHxHEIGHT");
  flags.AddString("gnuplot", &f->gnuplot, "the gnuplot program", {"DTRAIN_GNUPLOT"});
  flags.AddDouble("timeout", &f->timeout_s, "seconds gnuplot may take");
  std::vector<std::string> positional;
  absl::Status s = flags.Parse(args, &positional);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one PREFIX (as given to the workers' --model-prefix), got ", positional.size()));
  }
  f->prefix = positional[0];
  if (f->format.empty()) f->format = absl::EndsWithIgnoreCase(f->output, ".svg") ? "svg" : "png";
  if (f->format != "png" && f->format != "svg") {
    return absl::InvalidArgumentError(absl::StrCat("--format must be png or svg, got '", f->format, "'"));
  }
  if (f->output.empty()) f->output = absl::StrCat(f->prefix, "-metrics.", f->format);
  const std::vector<std::string> wh = absl::StrSplit(f->size, 'x');
  if (wh.size() != 2 || !absl::SimpleAtoi(wh[0], &spec->width) || !absl::SimpleAtoi(wh[1], &spec->height) ||
      spec->width < 200 || spec->height < 200 || spec->width > 10000 || spec->height > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--size must be WIDTHxHEIGHT, 200..10000 each, got '", f->size, "'"));
  }
  if (!(f->timeout_s > 0)) return absl::InvalidArgumentError("--timeout must be > 0");
  spec->format = f->format == "svg" ? ImageFormat::kSvg : ImageFormat::kPng;
  spec->output_path = f->output;
  spec->title = absl::StrCat("dtrain: ", std::filesystem::path(f->prefix).filename().string());
  return absl::OkStatus();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `gnuplot script` with its output in `log`; gives up (SIGKILL) at `deadline`.
absl::Status RunGnuplot(const std::string& gnuplot, const std::string& script, const std::string& log,
                        absl::Time deadline) {
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::execlp(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrCat(gnuplot, " did not finish in time"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::NotFoundError(
        absl::StrCat("cannot run '", gnuplot, "' (install gnuplot-nox; deploy/install-deps.sh does)"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(gnuplot, " failed: ", ReadAll(log)));
  }
  return absl::OkStatus();
}

}  // namespace

int PlotCommand(const std::vector<std::string>& args) {
  PlotFlags f;
  PlotSpec spec;
  bool help = false;
  if (absl::Status s = ParsePlotFlags(args, &f, &spec, &help); !s.ok() || help) {
    if (!s.ok()) std::fprintf(stderr, "dtrain plot: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  const std::string csv = metrics::MetricsCsvPath(f.prefix);
  absl::StatusOr<std::vector<metrics::EpochFigures>> rows = metrics::ReadEpochFigures(csv);
  if (rows.ok() && rows->empty()) {
    rows = absl::FailedPreconditionError(absl::StrCat(csv, " has no epochs yet"));
  }
  if (!rows.ok()) {
    std::fprintf(stderr, "dtrain plot: %s\n", std::string(rows.status().message()).c_str());
    return 1;
  }
  // TMPDIR is the system's convention for where temporary files go, not a dtrain
  // setting, so it has no flag: read as every mkdtemp user reads it.
  const char* base = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/dtrain-plot-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "dtrain plot: cannot create a temporary directory\n");
    return 1;
  }
  spec.data_path = dir + "/epochs.csv";
  std::ofstream(spec.data_path) << PlotData(*rows);
  const absl::Time deadline = absl::Now() + absl::Seconds(f.timeout_s);
  // pngcairo draws better; plain png (libgd) is the fallback for a gnuplot without cairo.
  const std::vector<std::string> terminals =
      spec.format == ImageFormat::kSvg ? std::vector<std::string>{"svg"} : std::vector<std::string>{"pngcairo", "png"};
  absl::Status s;
  for (const std::string& terminal : terminals) {
    spec.terminal = terminal;
    std::ofstream(dir + "/plot.gp") << PlotScript(spec, *rows);
    s = RunGnuplot(f.gnuplot, dir + "/plot.gp", dir + "/gnuplot.log", deadline);
    if (s.ok() || s.code() != absl::StatusCode::kInternal) break;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (s.ok() && (std::filesystem::file_size(f.output, ec) == 0 || ec)) {
    s = absl::InternalError(absl::StrCat("gnuplot wrote nothing to ", f.output));
  }
  if (!s.ok()) {
    std::fprintf(stderr, "dtrain plot: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("dtrain plot: %zu epoch%s of %s drawn to %s\n", rows->size(), rows->size() == 1 ? "" : "s", csv.c_str(),
              f.output.c_str());
  return 0;
}

}  // namespace dtrain::launcher
